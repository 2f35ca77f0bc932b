// Compute threads per rank (see thread_budget.h).
#include "train/thread_budget.h"

#include <omp.h>

#include <algorithm>
#include <string_view>

namespace reel::core {

Result<ThreadBudget> ThreadsPerRank(const GetEnv& getenv, int ranks_in_process, int cores,
                                    int online) {
  ThreadBudget budget;
  if (getenv("OMP_NUM_THREADS") != nullptr) return budget;
  cores = std::max(1, cores);
  online = std::max(cores, online);
  ranks_in_process = std::max(1, ranks_in_process);
  int sharing = 1;  // processes on this host that share this process's cores
  std::string counted;
  for (const char* name :
       {"REEL_LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* value = getenv(name);
    if (value == nullptr) continue;
    REEL_ASSIGN_OR_RETURN(const int processes, ParseEnvInt(name, value));
    if (processes < 1)
      return InvalidArgumentError(std::string(name) + "=" + value +
                                  ": the processes on this host must be at least 1");
    sharing = processes;
    if (name != std::string_view("REEL_LOCAL_WORLD_SIZE") && cores < online) {
      // An MPI launcher bound its processes (to cores, sockets, NUMA nodes): about
      // processes x cores / online of them share this process's.
      sharing = std::clamp((processes * cores + online - 1) / online, 1, processes);
    }
    counted = std::string(name) + "=" + value;
    break;
  }
  const int ranks = sharing * ranks_in_process;
  if (ranks <= 1) return budget;
  budget.threads = std::max(1, cores / ranks);
  budget.why = std::to_string(ranks) + " ranks share this process's " + std::to_string(cores) +
               " core(s) (" + (counted.empty() ? "" : counted + ", ") +
               std::to_string(ranks_in_process) +
               " in this process): " + std::to_string(budget.threads) +
               " compute thread(s) per rank (OMP_NUM_THREADS=N sets another count)";
  return budget;
}

int TeamSize() { return omp_get_max_threads(); }

ScopedThreads::ScopedThreads(int threads) {
  if (threads <= 0) return;
  saved_ = omp_get_max_threads();
  omp_set_num_threads(threads);
}

ScopedThreads::~ScopedThreads() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

}  // namespace reel::core
