// Settings that every rank of one job must share, checked before the ranks depend on them.
//
// Ranks that train one model or merge their results must run the same configuration in the
// parts that decide what they compute together: a rank with another seed splits the data
// differently (records read twice or never), one with another learning rate or model drifts
// away from the others while rank 0 alone writes the checkpoint, one with another schedule waits
// in collectives the others never enter. Launchers start every rank with the same command, but
// `--nnodes` jobs, per-host configs and `--set` per rank can differ; this turns the difference
// into one clear error on every rank before anything is trained or written (as PyTorch's DDP
// compares its processes' parameter shapes first).
//
// Thread-safety: CheckRanksAgree is a collective: every rank of `comm` calls it once, from the
// thread that runs the rank's collectives.
#ifndef REEL_CORE_RANK_AGREEMENT_H_
#define REEL_CORE_RANK_AGREEMENT_H_

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "reel/core/timeouts.h"
#include "reel/status.h"
#include "reel/transport.h"

namespace reel::core {

// A rank's settings by name, e.g. {"trainer.seed", "7"}, {"model.options.hidden", "128"}.
using RankSettings = std::map<std::string, std::string>;

// Ok when every rank passed the same settings. Otherwise InvalidArgument on every rank, naming
// the first setting (in name order) where a rank differs from rank 0:
//   every rank must use the same NAME (rank 0: A, rank R: B): WHY
// A setting a rank does not have shows as "(unset)". Waits at most `timeout` for the others.
Status CheckRanksAgree(Communicator& comm, const RankSettings& mine, std::string_view why,
                       std::chrono::milliseconds timeout = kDefaultTimeout);

}  // namespace reel::core

#endif  // REEL_CORE_RANK_AGREEMENT_H_
