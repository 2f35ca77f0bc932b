// The timing pieces `reel bench` and `reel plan --measure` share: repeated timings and their
// spread, ranks as threads, and one model's training step and forward pass at a given shape.
//
// Thread-safety: functions; OnThreads runs its function on one thread per rank.
#ifndef REEL_CORE_CLI_MEASURE_H_
#define REEL_CORE_CLI_MEASURE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reel/core/conformance.h"
#include "reel/core/registry.h"
#include "reel/data_source.h"
#include "reel/status.h"
#include "reel/transport.h"

namespace reel::cli {

using Times = std::vector<double>;  // seconds, one per repetition

struct Spread {
  double min = 0, median = 0, max = 0;
};
Spread Summary(Times t);

// Times fn once; its error if it fails.
Result<double> Time(const std::function<Status()>& fn);

// An inproc group of `n` ranks, each with the core's collectives.
Result<std::vector<std::unique_ptr<Communicator>>> LocalRanks(int n);

// Runs fn(rank) on one thread per rank; the first error, naming its rank.
Status OnThreads(int n, const std::function<Status(int)>& fn);

// Reads `source` to the end of its epoch, counting the videos into `*videos` when given.
Status DrainEpoch(DataSource& source, int64_t* videos = nullptr);

// One model's step (forward, the core's loss, backward, the sync optimizer's update with `rule`)
// and forward pass alone, timed `reps` times each after a warm-up, on synthetic input of
// `batch` videos and `frames` frames (the features of `shape`, or the model's defaults).
struct ModelTimes {
  int64_t params = 0;
  int64_t frame_count = 0;  // valid frames of the longest frame-level feature per step; 0: none
  double mean_frames = 0;   // that feature's valid frames per video; 0: none
  double startup = 0;       // Initialize + optimizer Setup + the cold first step, seconds
  Times step, forward;      // per repetition, seconds per batch (over `inputs`, when given)
  // Per repetition, the shares of its steps' time in backward, and in the update (what follows
  // backward: the trainer's clip or check, the optimizer's step); forward and loss are the rest.
  Times backward_share, update_share;
};
// How the trainer steps (core/src/train/trainer.cc, TrainStep): the batches to step over in turn
// (none: one synthetic batch of `frames` frames), the gradient clip (trainer.clip_norm) and
// the non-finite check of each gradient (trainer.stop_on_nonfinite).
struct StepInputs {
  std::vector<Batch> batches;
  double clip_norm = 0;
  bool stop_on_nonfinite = false;
  Precision precision = Precision::kFp32;  // ModelContext::precision
};
Result<ModelTimes> TimeModel(core::Registry& registry, const std::string& model,
                             const std::map<std::string, std::string>& options,
                             const core::ConformanceOptions& shape, int64_t batch, int64_t frames,
                             int reps, const std::string& rule = "adam",
                             const StepInputs& inputs = {});

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_MEASURE_H_
