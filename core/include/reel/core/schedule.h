// Learning-rate schedules and global gradient-norm clipping, the two knobs the trainer turns
// between Backward() and Optimizer::Step().
//
// A schedule is a pure function of the step (and, for cosine on an epoch budget, the epoch), so a
// resumed run gets the same learning rates as an uninterrupted one. Thread-safety: values; const
// methods from any thread.
#ifndef REEL_CORE_SCHEDULE_H_
#define REEL_CORE_SCHEDULE_H_

#include <cstdint>
#include <span>
#include <string>

#include "reel/status.h"

namespace reel::core {

// The learning-rate schedule of a run, as its config gives it.
struct LrScheduleConfig {
  double base = 0.001;
  std::string schedule = "constant";  // constant | exponential (staircase) | cosine
  int64_t decay_steps = 0;            // exponential: multiply by decay_rate every decay_steps
  double decay_rate = 0.95;           // exponential
  double min_lr = 0.0;                // cosine: the rate at the end of the budget
  int64_t warmup_steps = 0;           // linear ramp from base/warmup to base over these steps
  int64_t total_steps = 0;            // cosine: the length of the run, in steps
  // Cosine without total_steps: the length of the run in epochs. The rate then anneals once per
  // epoch, as PyTorch's CosineAnnealingLR(T_max=epochs) stepped after every epoch: epoch e of E
  // trains at min_lr + (base - min_lr) * (1 + cos(pi * e / E)) / 2.
  int64_t total_epochs = 0;
};

// The learning rate at each step, from a checked LrScheduleConfig.
class LrSchedule {
 public:
  // InvalidArgument naming the field for an unknown schedule or inconsistent numbers.
  static Result<LrSchedule> Create(const LrScheduleConfig& config);

  // The learning rate for 0-based `step` in 0-based `epoch`.
  double At(int64_t step, int64_t epoch = 0) const;
  const LrScheduleConfig& config() const { return config_; }

 private:
  explicit LrSchedule(LrScheduleConfig c) : config_(std::move(c)) {}
  LrScheduleConfig config_;
};

// Scales `grads` in place so their global L2 norm is at most `max_norm` (as
// tf.clip_by_global_norm); max_norm <= 0 disables clipping. Returns the norm before clipping.
double ClipByGlobalNorm(std::span<float> grads, double max_norm);
// The scaling half of ClipByGlobalNorm, for a part of a gradient whose global norm `norm` was
// summed elsewhere (a rank's shard): scales `grads` by max_norm / norm when norm > max_norm > 0.
void ScaleToGlobalNorm(std::span<float> grads, double norm, double max_norm);

}  // namespace reel::core

#endif  // REEL_CORE_SCHEDULE_H_
