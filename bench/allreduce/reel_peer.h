// A rank of reel's AllReduce over a transport plugin, as a training job would run it: the
// transport comes from the registry (plugins found beside the executable), the communicator gets
// the core's collectives (native ones where the transport has them). Shared by the programs
// that time reel's AllReduce (reel_allreduce_peer, mpi_interleaved).
//
// Flags: --transport NAME and --option KEY=VALUE (repeatable). Rank, world size and coordinator
// come from REEL_RANK, REEL_WORLD_SIZE and REEL_COORDINATOR; with neither rank variable set the
// transport discovers them (mpi under mpirun).
#ifndef REEL_BENCH_ALLREDUCE_REEL_PEER_H_
#define REEL_BENCH_ALLREDUCE_REEL_PEER_H_

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reel/core/collectives.h"
#include "reel/core/host.h"

namespace reel::bench {

struct ReelPeer {
  std::string transport;
  std::map<std::string, std::string> options;

  // Takes --transport and --option out of `args` (the rest stay, in order); false on a malformed
  // or missing value.
  bool ParseFlags(std::vector<std::string>& args) {
    std::vector<std::string> rest;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] != "--transport" && args[i] != "--option") {
        rest.push_back(args[i]);
        continue;
      }
      if (i + 1 >= args.size()) return false;
      const std::string& value = args[++i];
      if (args[i - 1] == "--transport") {
        transport = value;
      } else {
        const size_t eq = value.find('=');
        if (eq == std::string::npos) return false;
        options[value.substr(0, eq)] = value.substr(eq + 1);
      }
    }
    args = rest;
    return !transport.empty();
  }

  // Joins the group. The host stays alive with the communicator (its plugins are loaded in it).
  Result<std::unique_ptr<Communicator>> Connect() {
    REEL_ASSIGN_OR_RETURN(host_, core::Host::Create({}));
    REEL_ASSIGN_OR_RETURN(auto created, host_->registry().CreateTransport(transport, options));
    transport_ = std::move(created);
    const TransportContext ctx{
        EnvInt("REEL_RANK", kDiscover), EnvInt("REEL_WORLD_SIZE", kDiscover),
        std::getenv("REEL_COORDINATOR") ? std::getenv("REEL_COORDINATOR") : ""};
    REEL_ASSIGN_OR_RETURN(auto joined,
                          transport_->Connect(ctx, DeadlineIn(std::chrono::minutes(1))));
    return core::WithRingCollectives(std::move(joined));
  }

 private:
  static int EnvInt(const char* name, int otherwise) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : otherwise;
  }

  std::unique_ptr<core::Host> host_;
  core::Owned<Transport> transport_;
};

}  // namespace reel::bench

#endif  // REEL_BENCH_ALLREDUCE_REEL_PEER_H_
