// Raw Open MPI's MPI_Allreduce, one rank per process: the peer of reel's transports in
// run_allreduce.py. `mpirun -n N mpi_allreduce_peer [--thread-multiple] [sweep flags]`
// (allreduce_sweep.h). --thread-multiple initialises MPI as reel's mpi transport does
// (MPI_THREAD_MULTIPLE, so that Send and Recv may run on several threads at once), which costs
// Open MPI locks on every call: the program mpi_mt, which tells that cost from reel's own.
#include <mpi.h>

#include "allreduce_sweep.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool multiple = !args.empty() && args.front() == "--thread-multiple";
  if (multiple) args.erase(args.begin());
  int provided = 0;
  MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  reel::bench::Sweep sweep;
  if (!sweep.ParseFlags(args) || !args.empty()) {
    std::fprintf(stderr,
                 "usage: mpi_allreduce_peer [--thread-multiple] [--min-bytes B] [--max-bytes B] "
                 "[--budget-bytes B] [--max-calls N]\n");
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
