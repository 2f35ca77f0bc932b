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

struct CommandContext {
  StorageResolver* storage = nullptr;  // not owned; resolves file://, s3://, ... URIs
  std::ostream* out = nullptr;         // results
  std::ostream* err = nullptr;         // diagnostics and progress
};

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
