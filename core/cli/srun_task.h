// A reel command that srun started as one task of a step: placed among the step's tasks before it
// runs, from Slurm's variables (reel/core/slurm_step.h), as `reel launch` places its ranks.
#ifndef REEL_CORE_CLI_SRUN_TASK_H_
#define REEL_CORE_CLI_SRUN_TASK_H_

#include <string>

#include "cli.h"

namespace reel::cli {

// True for the commands that run as ranks of a group (train, eval, predict, tune).
bool RunsAsRanks(const std::string& command);

// Exports the REEL_* variables that place this task (those the user set win) and says so on
// env.err ("reel: started by srun (job 12, step 0): rank 3 of 8, ..."); nothing when srun did not
// start the process. REQUIRES: no other thread runs yet (it changes the environment).
// Errors: InvalidArgument naming the Slurm variable that is missing or inconsistent.
Status PlaceSrunTask(CliEnv& env);

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_SRUN_TASK_H_
