// Raw Open MPI's MPI_Allreduce, one rank per process: the peer of reel's transports in
// run_allreduce.py. `mpirun -n N mpi_allreduce_peer [sweep flags]` (allreduce_sweep.h).
#include <mpi.h>

#include "allreduce_sweep.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  reel::bench::Sweep sweep;
  if (!sweep.ParseFlags(args) || !args.empty()) {
    std::fprintf(stderr,
                 "usage: mpi_allreduce_peer [--min-bytes B] [--max-bytes B] "
                 "[--budget-bytes B]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int code = sweep.Run(
      rank,
      [](float* data, size_t n) -> reel::bench::Sweep::Call {
        return [=] {
          return MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD) == MPI_SUCCESS;
        };
      },
      [] { return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS; });
  MPI_Finalize();
  return code;
}
