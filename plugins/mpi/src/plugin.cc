// The mpi plugin: transport `mpi`, one rank per process of an MPI job (mpirun, srun).
#include "reel/plugin.h"

#include "mpi_communicator.h"

namespace {

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Transport>(
      {"mpi",
       "one rank per process of an MPI job (mpirun, srun): rank and size from MPI, native "
       "allreduce, broadcast, allgather and barrier",
       reel::mpi::MpiOptionSchema()},
      [](const reel::Options& o) -> reel::Result<std::unique_ptr<reel::Transport>> {
        REEL_ASSIGN_OR_RETURN(reel::mpi::MpiOptions options, reel::mpi::MpiOptionsFrom(o));
        return reel::mpi::MakeMpiTransport(options);
      });
}

}  // namespace

REEL_PLUGIN("mpi", "0.1.0", "MPI transport (Open MPI): ranks of an mpirun/srun job", Register)
