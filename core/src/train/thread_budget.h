// How many compute threads each rank of this process may use, when nothing set it.
//
// Every rank's model and the core's loss and update rules run on OpenMP teams, by default as
// wide as the process's cores. Ranks that share cores then oversubscribe them: two `reel launch`
// processes on 2 cores ran 2 teams of 2 threads each, and trained at 0.5-0.8 of the speed of the
// same two ranks with a thread each (bench/RESULTS.md, "thread budget"). So, as torchrun sets
// OMP_NUM_THREADS for the processes it starts and mpirun binds each to its cores, the ranks that
// share this process's cores divide them: threads per rank = max(1, cores / ranks sharing), where
//   cores = those of this process's affinity mask (taskset, cpusets, a launcher's binding),
//   ranks sharing = the processes sharing those cores x the ranks of this process,
//   the processes sharing them = REEL_LOCAL_WORLD_SIZE (`reel launch`, which binds nothing: all
//   of its processes on this host); under an MPI launcher that bound its processes (the mask
//   smaller than the machine), OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI) or MPI_LOCALNRANKS (MPICH)
//   x mask / online cores, rounded up (one per core bound to a core, the socket's ranks bound to
//   a socket), and all of them when it did not bind; else 1.
// OMP_NUM_THREADS, when set, is the user's choice and wins: no budget then (0).
//
// Thread-safety: ThreadsPerRank only reads through `getenv`; ScopedThreads changes the calling
// thread's own OpenMP setting.
#ifndef REEL_CORE_SRC_TRAIN_THREAD_BUDGET_H_
#define REEL_CORE_SRC_TRAIN_THREAD_BUDGET_H_

#include <string>

#include "reel/core/rank_environment.h"
#include "reel/host_cores.h"
#include "reel/status.h"

namespace reel::core {

struct ThreadBudget {
  int threads = 0;  // per rank; 0: no budget (the machine's or OMP_NUM_THREADS' default)
  std::string why;  // what was divided by what, for the run's first lines; empty when 0
};

// The budget for `ranks_in_process` ranks of this process, whose affinity mask holds `cores` of
// the machine's `online` cores. Errors: InvalidArgument naming the variable when a process count
// is not a whole number >= 1.
Result<ThreadBudget> ThreadsPerRank(const GetEnv& getenv, int ranks_in_process, int cores,
                                    int online);

// The CPUs this process may run on, and the machine's online CPUs: reel/host_cores.h.
using reel::CoresAvailable;
using reel::OnlineCores;

// The calling thread's OpenMP team size (omp_get_max_threads): the compute threads a model step,
// the loss or an update rule started on this thread would use.
int TeamSize();

// Sets the calling thread's OpenMP team size to `threads` (nothing when 0) until destroyed.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_ = 0;  // the team size before, or 0 when unchanged
};

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_THREAD_BUDGET_H_
