// What `reel plugins check` and `reel bench` share to build a component from the command line:
// the flags that give its options and a model's input features, and a transport made ready for a
// fresh group of threads on loopback.
#ifndef REEL_CORE_CLI_COMPONENT_FLAGS_H_
#define REEL_CORE_CLI_COMPONENT_FLAGS_H_

#include <map>
#include <string>

#include "reel/core/conformance.h"
#include "reel/core/registry.h"

namespace reel::cli {

// "NAME=WIDTH" or "NAME=WIDTHxFRAMES" (frame level) into options.features; InvalidArgument
// naming the flag otherwise.
Status ParseFeatureFlag(const std::string& flag, core::ConformanceOptions& options);

// "PREFIX.KEY=VALUE" (--option of plugins check: PREFIX names the component) into
// options[PREFIX][KEY]; InvalidArgument naming the flag otherwise.
Status ParseComponentOptionFlag(const std::string& flag,
                                std::map<std::string, std::map<std::string, std::string>>& options);

// A port on 127.0.0.1 that was free a moment ago (0 if none could be had).
int FreeLoopbackPort();

// Makes fresh transports of one registered component for groups of ranks as threads: each call
// gives a transport and a coordinator of its own (a fresh loopback port, and for a transport that
// forms groups by name, an option `world`, a fresh name unless the options set one).
class TransportMaker {
 public:
  TransportMaker(const core::Registry& registry, const core::ComponentEntry& entry,
                 std::map<std::string, std::string> options);
  struct Made {
    std::unique_ptr<Transport> transport;
    std::string coordinator;
  };
  Result<Made> Make();

 private:
  const core::Registry& registry_;
  const core::ComponentEntry& entry_;
  std::map<std::string, std::string> options_;
  bool named_groups_ = false;
  std::shared_ptr<int> groups_ = std::make_shared<int>(0);  // shared by copies
};

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_COMPONENT_FLAGS_H_
