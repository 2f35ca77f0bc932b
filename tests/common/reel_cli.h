// Runs the built reel command as a user would, for tests that check what it prints: one shell
// command line, stdout and stderr together, REEL_PLUGIN_PATH unset so only the flags given and
// the build's own plugins count. (The end-to-end tests use tests/e2e/e2e_util.h, with argument
// vectors and a working directory.)
#ifndef REEL_TESTS_COMMON_REEL_CLI_H_
#define REEL_TESTS_COMMON_REEL_CLI_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace reel::cli_testing {

struct CliRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

// `args` is pasted into a shell command line after the binary's path.
inline CliRun Reel(const std::string& args) {
  std::string cmd = "env -u REEL_PLUGIN_PATH " REEL_BINARY_DIR "/bin/reel " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The library of bundled plugin `name` (tfrecord, moe, ...) in this build.
inline std::string Bundled(const std::string& name) {
  return REEL_BINARY_DIR "/lib/reel/plugins/libreel_" + name + ".so";
}

}  // namespace reel::cli_testing

#endif  // REEL_TESTS_COMMON_REEL_CLI_H_
