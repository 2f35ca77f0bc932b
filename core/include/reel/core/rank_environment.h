// Where this process stands in a group of ranks, as launchers say it through the environment.
//
// `reel launch` and hand-written scripts set REEL_RANK, REEL_WORLD_SIZE and REEL_COORDINATOR
// (host:port of rank 0) in the style of torchrun. MPI launchers (mpirun, srun) set their own
// variables instead; then rank and world size are left to the transport to discover (kDiscover in
// reel/transport.h), because only the MPI runtime knows them for sure.
//
// Parsing is strict: a value that is not a whole decimal number, a rank outside
// [0, REEL_WORLD_SIZE), or only one of the two variables set is InvalidArgument naming the
// variable and its value; nothing is silently taken as 0.
//
// Thread-safety: the functions only read the environment (through `getenv`).
#ifndef REEL_CORE_RANK_ENVIRONMENT_H_
#define REEL_CORE_RANK_ENVIRONMENT_H_

#include <functional>
#include <string>

#include "reel/transport.h"

namespace reel::core {

// Looks up one environment variable; null when unset. Tests pass their own.
using GetEnv = std::function<const char*(const char*)>;
GetEnv ProcessEnvironment();

// The context from REEL_RANK, REEL_WORLD_SIZE and REEL_COORDINATOR. With neither REEL_RANK nor
// REEL_WORLD_SIZE set, rank and world_size are kDiscover.
Result<TransportContext> TransportContextFromEnvironment(
    const GetEnv& getenv = ProcessEnvironment());

// The name of the variable by which an MPI launcher marked this process (OMPI_COMM_WORLD_RANK from
// Open MPI's mpirun, PMIX_RANK from PMIx launchers such as srun, PMI_RANK from MPICH's), or ""
// when none is set.
std::string MpiLauncherVariable(const GetEnv& getenv = ProcessEnvironment());

// Parses `value` of variable `name` as a whole decimal int (InvalidArgument naming both if not).
Result<int> ParseEnvInt(const char* name, const char* value);

}  // namespace reel::core

#endif  // REEL_CORE_RANK_ENVIRONMENT_H_
