// The ranks of a command that a launcher started several times: `reel launch` (REEL_RANK /
// REEL_WORLD_SIZE / REEL_COORDINATOR; transport REEL_TRANSPORT, else tcp) or an MPI launcher
// (transport mpi, which finds rank and size itself). `reel tune` searches over them, `reel eval`
// and `reel predict` split their data over them. A config's transport section, when present,
// names the transport and its options instead (core::ChooseTransport).
#ifndef REEL_CORE_CLI_LAUNCHED_RANKS_H_
#define REEL_CORE_CLI_LAUNCHED_RANKS_H_

#include <memory>

#include "cli.h"
#include "config.pb.h"
#include "reel/core/registry.h"
#include "reel/transport.h"

namespace reel::cli {

struct LaunchedRanks {
  core::Owned<Transport> transport;
  std::unique_ptr<Communicator> comm;  // null: this process runs alone; else every collective works
                                       // (core::WithRingCollectives)
};

// Connects this process's rank within 5 minutes, first saying on env.err which transport it chose
// when the config names none; a process no launcher started (or a world of one) gets no
// communicator. `isolate_failures` as in TransportContext (reel/transport.h).
Result<LaunchedRanks> JoinLaunchedRanks(CliEnv& env, const config::RunConfig& config,
                                        bool isolate_failures);

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_LAUNCHED_RANKS_H_
