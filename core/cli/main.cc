// The reel command: the first host application of the core.
//
//   reel [--plugin-dir DIR]... [--storage SCHEME.OPTION=VALUE]... COMMAND [ARGS...]
//
// Core commands come from CoreCommands(); any other COMMAND is looked up among the `command`
// components that plugins registered (e.g. `reel synth` from the tfrecord plugin).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>

extern char** environ;

#include "cli.h"
#include "interrupt.h"
#include "reel/core/host.h"
#include "srun_task.h"

namespace reel::cli {
namespace {

void PrintHelp(CliEnv& env, const std::vector<CliCommand>& commands) {
  env.out << "reel — train multi-label video classifiers (YouTube-8M style)\n\n"
          << "usage: reel [--plugin-dir DIR]... [--storage SCHEME.OPTION=VALUE]... COMMAND "
             "[ARGS...]\n\ncommands:\n";
  auto line = [&](const std::string& name, const std::string& summary) {
    env.out << "  " << name << std::string(name.size() < 10 ? 10 - name.size() : 1, ' ') << summary
            << "\n";
  };
  for (const CliCommand& c : commands) line(c.name, c.summary);
  for (const core::ComponentEntry* e : env.host.registry().List(ComponentKind::kCommand))
    line(e->info.name, e->info.description + " [" + e->provider + "]");
  env.out << "\nglobal flags:\n"
          << "  --plugin-dir DIR  search DIR for plugins first (then $REEL_PLUGIN_PATH, then the\n"
          << "                    install's lib/reel/plugins)\n"
          << "  --storage SCHEME.OPTION=VALUE\n"
          << "                    an option of the storage serving SCHEME:// URIs, e.g.\n"
          << "                    s3.endpoint=http://127.0.0.1:4568 (also "
             "REEL_STORAGE_S3_ENDPOINT=...;\n"
          << "                    both win over a config's storage sections)\n"
          << "\n`reel COMMAND --help` shows a command's usage.\n";
}

// How every command's outcome — core or plugin — becomes the process's exit status and message:
// an error is printed as "reel NAME: STATUS", with the usage after a usage error (InvalidArgument,
// as reel/command.h asks of plugin commands); the status is the one a command set in
// env.exit_code (reel launch: a rank's), else 0 on success, 130 when interrupted (Cancelled:
// Ctrl-C or SIGTERM, as a shell reports a Ctrl-C), 75 when a peer or service was unavailable
// (kExitUnavailable: Unavailable or DeadlineExceeded) and 1 for any other error.
int Finish(CliEnv& env, const std::string& name, const std::string& usage, const Status& s) {
  // The command is over: a SIGINT or SIGTERM now — `reel launch` stopping the ranks a failed rank
  // left behind, say — would only cut its message off. Ignored, for every thread, until the
  // imminent exit (a command with an InterruptScope has ignored them since the scope ended).
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  if (!s.ok()) env.err << "reel " << name << ": " << s << "\n";
  if (s.code() == StatusCode::kInvalidArgument && !env.arguments_accepted)
    env.err << "usage: " << usage << "\n";
  if (env.exit_code >= 0) return env.exit_code;
  if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded)
    return kExitUnavailable;
  return s.ok() ? 0 : s.code() == StatusCode::kCancelled ? 130 : 1;
}

// Every line on stderr in one write. stderr is unbuffered and std::cerr flushes after every
// insertion, so `err << "reel: " << status << "\n"` took three writes, and mpirun and srun, which
// merge the ranks' stderr as it comes, put another rank's words between them ("reel: reel:
// started by ..."). Line-buffered, a line is one write; std::flush (the live progress line) still
// writes at once, and a line longer than the buffer goes in pieces.
void WholeLinesOnStderr() {
  std::setvbuf(stderr, nullptr, _IOLBF, BUFSIZ);
  std::cerr.unsetf(std::ios_base::unitbuf);
}

int Run(int argc, char** argv) {
  ExitOnInterrupt();  // status 130 on SIGINT or SIGTERM, whatever the command (interrupt.h)
  WholeLinesOnStderr();
  std::vector<std::string> plugin_dirs, storage_flags, rest;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::vector<std::string>* into = nullptr;
    std::string flag;
    for (const char* f : {"--plugin-dir", "--storage"}) {
      if (a == f || a.rfind(std::string(f) + "=", 0) == 0) {
        flag = f;
        into = flag == "--plugin-dir" ? &plugin_dirs : &storage_flags;
      }
    }
    if (into == nullptr) {
      rest.push_back(a);
    } else if (a.size() > flag.size()) {
      into->push_back(a.substr(flag.size() + 1));
    } else if (i + 1 < argc) {
      into->push_back(argv[++i]);
    } else {
      std::cerr << "reel: flag '" << flag << "' needs a value\n";
      return 2;
    }
  }
  core::HostOptions options;
  options.plugin_dirs = plugin_dirs;
  // Flags after the environment, so a flag wins over a variable for the same option.
  Status storage = core::AddStorageEnvironment(environ, options.storage_options);
  for (const std::string& f : storage_flags)
    if (storage.ok()) storage = core::AddStorageFlag(f, options.storage_options);
  if (!storage.ok()) {
    std::cerr << "reel: " << storage << "\n";
    return 2;
  }
  Result<std::unique_ptr<core::Host>> host = core::Host::Create(std::move(options));
  if (!host.ok()) {
    std::cerr << "reel: " << host.status() << "\n";
    return 1;
  }
  CliEnv env{**host,      std::cout,     std::cerr, static_cast<bool>(::isatty(2)),
             plugin_dirs, storage_flags, argv[0]};
  std::vector<CliCommand> commands = CoreCommands();

  if (rest.empty() || rest[0] == "--help" || rest[0] == "-h" || rest[0] == "help") {
    PrintHelp(env, commands);
    return rest.empty() ? 2 : 0;
  }
  const std::string name = rest[0];
  std::vector<std::string> args(rest.begin() + 1, rest.end());
  bool wants_help = !args.empty() && (args[0] == "--help" || args[0] == "-h");

  for (const CliCommand& c : commands) {
    if (c.name != name) continue;
    if (wants_help) {
      env.out << "usage: " << c.usage << "\n" << c.summary << "\n";
      return 0;
    }
    if (RunsAsRanks(name)) {
      // Before the command starts any thread: a task of an srun step gets its REEL_* variables.
      if (Status placed = PlaceSrunTask(env); !placed.ok()) {
        env.err << "reel " << name << ": " << placed << "\n";
        return 2;
      }
    }
    return Finish(env, name, c.usage, c.run(env, args));
  }

  if (env.host.registry().Find(ComponentKind::kCommand, name) != nullptr) {
    Result<core::Owned<Command>> cmd = env.host.registry().CreateCommand(name);
    if (!cmd.ok()) {
      env.err << "reel " << name << ": " << cmd.status() << "\n";
      return 1;
    }
    if (wants_help) {
      env.out << "usage: " << (*cmd)->Usage() << "\n";
      return 0;
    }
    CommandContext ctx{&env.host.storage(), &env.out, &env.err};
    return Finish(env, name, (*cmd)->Usage(), (*cmd)->Run(args, ctx));
  }

  env.err << "reel: unknown command '" << name << "' (commands:";
  for (const CliCommand& c : commands) env.err << " " << c.name;
  for (const core::ComponentEntry* e : env.host.registry().List(ComponentKind::kCommand))
    env.err << " " << e->info.name;
  env.err << "; `reel plugins` shows which plugins were found)\n";
  return 2;
}

}  // namespace
}  // namespace reel::cli

int main(int argc, char** argv) { return reel::cli::Run(argc, argv); }
