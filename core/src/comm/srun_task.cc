#include "reel/core/srun_task.h"

#include <memory>
#include <utility>
#include <vector>

#include "train/thread_budget.h"

namespace reel::core {

Result<std::optional<SrunTask>> SrunTaskFromEnvironment(const GetEnv& getenv, int cores,
                                                        int online) {
  REEL_ASSIGN_OR_RETURN(std::optional<SlurmStep> step, SlurmStepFromEnvironment(getenv, cores));
  if (!step) return std::optional<SrunTask>();
  SrunTask task;
  auto added =
      std::make_shared<const std::vector<std::pair<std::string, std::string>>>(step->variables);
  task.env = [getenv, added](const char* name) -> const char* {
    if (const char* v = getenv(name); v != nullptr) return v;
    for (const auto& [k, v] : *added)
      if (k == name) return v.c_str();
    return nullptr;
  };
  // The CPUs each rank computes on: the thread budget over the placed environment, as training
  // will set it (OMP_NUM_THREADS, or no sharing: the OpenMP default).
  REEL_ASSIGN_OR_RETURN(ThreadBudget budget, ThreadsPerRank(task.env, 1, cores, online));
  const int cpus = budget.threads > 0 ? budget.threads : TeamSize();
  task.line = step->Describe() + ", " + std::to_string(cpus) + (cpus == 1 ? " CPU" : " CPUs");
  task.step = std::move(*step);
  return std::optional<SrunTask>(std::move(task));
}

}  // namespace reel::core
