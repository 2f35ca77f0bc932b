// Which ranks this process runs, over which transport, and how long ranks wait for each other:
// decided from the run config (the transport section, trainer.local_ranks) and the environment a
// launcher set (reel/core/rank_environment.h), before anything connects.
//
//   - This process runs M = trainer.local_ranks ranks as threads (unset or 0: one).
//   - With REEL_RANK=p and REEL_WORLD_SIZE=N it runs ranks p*M .. p*M+M-1 of a world of N*M
//     (N processes x M local ranks, over a transport that allows several ranks per process).
//   - Without them: M > 1 ranks form a world of M in this process; one rank leaves rank and world
//     size to the transport (kDiscover): MPI finds them, inproc forms a world of one.
//   - The transport is the config's; when it names none: the one REEL_TRANSPORT names (`reel
//     launch` sets it), else `mpi` if an MPI launcher started the
//     process (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK set), `tcp` if REEL_WORLD_SIZE > 1,
//     else the registry's default (`inproc`). A transport chosen this way is said in `why`.
//
// Thread-safety: a pure function of its arguments.
#ifndef REEL_CORE_RANK_PLAN_H_
#define REEL_CORE_RANK_PLAN_H_

#include <string>
#include <vector>

#include "config.pb.h"
#include "reel/core/rank_environment.h"
#include "reel/core/timeouts.h"
#include "reel/transport.h"

namespace reel::core {

// The decision described above: the transport and this process's ranks.
struct RankPlan {
  std::string transport;  // registry name
  std::string why;        // how `transport` was chosen when the config names none; else empty
  std::vector<TransportContext> ranks;  // this process's ranks, in order (may be kDiscover)
  Timeouts timeouts;
};

// The transport choice described above, for a process the launcher placed as `process` (from
// TransportContextFromEnvironment): the registry name, and how it was chosen when the config names
// none (else empty). `reel tune`'s ranks choose theirs this way too.
struct TransportChoice {
  std::string name;
  std::string why;
};
TransportChoice ChooseTransport(const config::RunConfig& config, const TransportContext& process,
                                const std::string& default_transport,
                                const GetEnv& getenv = ProcessEnvironment());

// The transport section's timeouts; a value that is not positive is InvalidArgument naming it.
Result<Timeouts> TimeoutsFrom(const config::RunConfig& config);

// `default_transport` is the registry's default (Registry::DefaultName). Errors (InvalidArgument)
// name the variable or field: a malformed REEL_* value, a negative trainer.local_ranks, several
// local ranks under an MPI launcher (it places every rank itself), bad timeouts.
Result<RankPlan> PlanRanks(const config::RunConfig& config, const std::string& default_transport,
                           const GetEnv& getenv = ProcessEnvironment());

}  // namespace reel::core

#endif  // REEL_CORE_RANK_PLAN_H_
