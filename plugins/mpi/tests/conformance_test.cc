// The communicator conformance suite over mpi, one rank per process: run as
// `mpirun -n N reel_mpi_conformance_tests` (CTest runs N = 2 and 3, at each thread level:
// test_thread_level.h). Rank and size come from MPI.
#include "mpi_communicator.h"
#include "reel/testing/transport_conformance.h"
#include "test_thread_level.h"

namespace reel::mpi {
namespace {

Result<conformance::Group> World() {
  return conformance::Group{MakeMpiTransport(AtTestThreadLevel()), ""};
}
Result<conformance::Group> PolledWorld() {
  return conformance::Group{MakeMpiTransport(AtTestThreadLevel({.polled_allreduce = true})), ""};
}
Result<conformance::Group> BlockingWorld() {
  return conformance::Group{MakeMpiTransport(AtTestThreadLevel({.blocking_allreduce = true})), ""};
}

REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(MpiWorld, conformance::RankPerProcess("mpi", World));
REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(MpiPolledAllReduce,
                                       conformance::RankPerProcess("mpi_polled", PolledWorld));
REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(MpiBlockingAllReduce,
                                       conformance::RankPerProcess("mpi_blocking", BlockingWorld));

}  // namespace
}  // namespace reel::mpi
