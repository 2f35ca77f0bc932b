// A process srun started as one task of a step, placed as a rank of one group: what `reel train`
// (and the other commands that run as ranks) and Python's reel.train both do before training, so
// that `srun -n 4 reel train ...` and `srun -n 4 python train.py` form one 4-rank run alike.
//
// The placement is SlurmStepFromEnvironment's (reel/core/slurm_step.h); this adds the environment
// the rest of reel then reads and the line that says where the task was put. The command exports
// the variables into its process before any thread starts (core/cli/srun_task.h); Python, whose
// threads may already run, passes the environment to the training job instead
// (TrainJobOptions::env) and changes nothing in the process (docs/slurm.md).
//
// Thread-safety: a pure function of what `getenv` returns; the returned GetEnv may be called
// from any thread.
#ifndef REEL_CORE_SRUN_TASK_H_
#define REEL_CORE_SRUN_TASK_H_

#include <optional>
#include <string>

#include "reel/core/rank_environment.h"
#include "reel/core/slurm_step.h"

namespace reel::core {

// Where srun placed this task, and what the rest of reel reads to see it.
struct SrunTask {
  SlurmStep step;
  // `getenv` with step.variables added (a variable `getenv` already has keeps its value).
  GetEnv env;
  // "started by srun (job 12, step 0): rank 3 of 8, transport tcp, coordinator ..., 2 CPUs": the
  // CPUs each rank computes on, from the thread budget over `env` (core/src/train/thread_budget.h).
  std::string line;
};

// The task this process is, or nullopt when srun did not start it (or a launcher placed it).
// `cores`: this process's affinity mask's size; `online`: the machine's online CPUs.
// Errors: SlurmStepFromEnvironment's, and the thread budget's (a variable naming a bad count).
Result<std::optional<SrunTask>> SrunTaskFromEnvironment(const GetEnv& getenv, int cores,
                                                        int online);

}  // namespace reel::core

#endif  // REEL_CORE_SRUN_TASK_H_
