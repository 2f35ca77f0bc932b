// A trial's folder under the search's workdir: `trials/c<config>/r<rung>/` holding its
// checkpoints, metrics log and config. A promoted trial (ASHA rung k > 0) starts from a copy of
// the newest checkpoint of its rung k-1 folder, so every attempt of every rung has a folder of its
// own and a retry starts clean.
#ifndef REEL_CORE_SRC_TUNE_TRIAL_DIR_H_
#define REEL_CORE_SRC_TUNE_TRIAL_DIR_H_

#include <cstdint>
#include <string>

#include "reel/status.h"

namespace reel::core::tune {

// "trials/c12/r1".
std::string TrialDirName(int64_t config, int rung);

// Makes the trial's folder ready and says whether the trial resumes from a checkpoint in it.
// `keep`: an interrupted trial run again — its own newest checkpoint, if any, is continued.
// Otherwise the folder is emptied, and a rung > 0 gets the previous rung's newest checkpoint
// (FailedPrecondition naming that folder when it has none).
Result<bool> PrepareTrialDir(const std::string& workdir, int64_t config, int rung, bool keep);

// Frees the disk of a finished trial (docs/tune.md, execution.keep_checkpoints): `needed` keeps
// its newest checkpoint only (what a promotion or the best trial's user continues from);
// otherwise its `checkpoints` folder goes. The config and metrics log stay either way.
Status TrimTrialCheckpoints(const std::string& workdir, int64_t config, int rung, bool needed);

}  // namespace reel::core::tune

#endif  // REEL_CORE_SRC_TUNE_TRIAL_DIR_H_
