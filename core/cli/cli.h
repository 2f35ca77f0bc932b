// The reel command's plumbing: a subcommand is a name, a one-line summary, a usage line and a
// function. Core subcommands (plugins, version, train, eval, ...) are listed in CoreCommands()
// (commands.cc); plugins add theirs as `command` components, which the dispatcher also finds.
#ifndef REEL_CORE_CLI_CLI_H_
#define REEL_CORE_CLI_CLI_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "reel/core/host.h"
#include "reel/status.h"

namespace reel::cli {

struct CliEnv {
  core::Host& host;
  std::ostream& out;
  std::ostream& err;
  bool err_is_tty = false;                 // progress lines redraw in place only on a terminal
  std::vector<std::string> plugin_dirs;    // the --plugin-dir flags given
  std::vector<std::string> storage_flags;  // the --storage flags given (SCHEME.OPTION=VALUE)
  std::string argv0;                       // how reel was invoked, to start child processes
  int exit_code = -1;  // a command that sets it decides the exit status (reel launch: a rank's)
  // Set by a command once its arguments are accepted and the work begins: an InvalidArgument
  // after that (a data or checkpoint problem found while training) is not a usage error, so no
  // usage line follows its message.
  bool arguments_accepted = false;
};

struct CliCommand {
  std::string name;
  std::string summary;  // one line for `reel --help`
  std::string usage;    // "reel train --config FILE [--set section.field=value ...]"
  // `args` are the words after the subcommand. Usage errors are InvalidArgument.
  std::function<Status(CliEnv& env, const std::vector<std::string>& args)> run;
};

// The exit status of a reel command that failed because a peer or a service was unavailable
// (Unavailable or DeadlineExceeded: a lost rank, a transport deadline, an unreachable endpoint),
// sysexits.h's EX_TEMPFAIL: a failure a rerun may not repeat. `reel launch --max-restarts`
// restarts ranks that fail so, or by a signal, and no others (docs/distributed.md).
constexpr int kExitUnavailable = 75;

// The core's subcommands, in the order `reel --help` lists them.
std::vector<CliCommand> CoreCommands();

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_CLI_H_
