#include "srun_task.h"

#include <cstdlib>

#include "reel/core/srun_task.h"
#include "reel/host_cores.h"

namespace reel::cli {

bool RunsAsRanks(const std::string& command) {
  return command == "train" || command == "eval" || command == "predict" || command == "tune";
}

Status PlaceSrunTask(CliEnv& env) {
  REEL_ASSIGN_OR_RETURN(std::optional<core::SrunTask> task,
                        core::SrunTaskFromEnvironment(core::ProcessEnvironment(),
                                                      reel::CoresAvailable(), reel::OnlineCores()));
  if (!task) return Status::Ok();
  for (const auto& [name, value] : task->step.variables)
    if (::setenv(name.c_str(), value.c_str(), /*overwrite=*/0) != 0)
      return InternalError("setenv " + name + " failed");
  env.err << "reel: " << task->line << "\n";
  return Status::Ok();
}

}  // namespace reel::cli
