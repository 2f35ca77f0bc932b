// Command: a subcommand of a host's command line ("reel synth", "reel inspect", ...), so a plugin
// can ship the tools that go with its components without the host knowing about them.
//
// Thread-safety: Run() is called once, from the host's main thread.
#ifndef REEL_COMMAND_H_
#define REEL_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "reel/status.h"
#include "reel/storage.h"

namespace reel {

// What the host lends a command for one Run(); every pointer outlives the call.
struct CommandContext {
  StorageResolver* storage = nullptr;  // not owned; resolves file://, s3://, ... URIs
  std::ostream* out = nullptr;         // results
  std::ostream* err = nullptr;         // diagnostics and progress
};

// A plugin's subcommand, built by a CommandFactory for one run of the host's command line.
class Command {
 public:
  virtual ~Command() = default;
  // One line, e.g. "reel synth --out DIR --videos N [--seed S]".
  virtual std::string Usage() const = 0;
  // `args` are the words after the command's name. A usage error is InvalidArgument; the host
  // prints the Status and the usage.
  virtual Status Run(const std::vector<std::string>& args, CommandContext& ctx) = 0;
};

}  // namespace reel

#endif  // REEL_COMMAND_H_
