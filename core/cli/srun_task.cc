#include "srun_task.h"

#include <cstdlib>

#include "reel/core/slurm_step.h"
#include "reel/host_cores.h"
#include "train/thread_budget.h"

namespace reel::cli {

bool RunsAsRanks(const std::string& command) {
  return command == "train" || command == "eval" || command == "predict" || command == "tune";
}

Status PlaceSrunTask(CliEnv& env) {
  REEL_ASSIGN_OR_RETURN(
      std::optional<core::SlurmStep> step,
      core::SlurmStepFromEnvironment(core::ProcessEnvironment(), reel::CoresAvailable()));
  if (!step) return Status::Ok();
  for (const auto& [name, value] : step->variables)
    if (::setenv(name.c_str(), value.c_str(), /*overwrite=*/0) != 0)
      return InternalError("setenv " + name + " failed");
  // The CPUs each rank computes on: the thread budget over what was just exported, as training
  // will set it (train/thread_budget.h; OMP_NUM_THREADS, or no sharing: the OpenMP default).
  REEL_ASSIGN_OR_RETURN(
      core::ThreadBudget budget,
      core::ThreadsPerRank(core::ProcessEnvironment(), 1, CoresAvailable(), OnlineCores()));
  const int cpus = budget.threads > 0 ? budget.threads : core::TeamSize();
  env.err << "reel: " << step->Describe() << ", " << cpus << (cpus == 1 ? " CPU" : " CPUs") << "\n";
  return Status::Ok();
}

}  // namespace reel::cli
