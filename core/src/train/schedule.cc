// Learning-rate schedules and gradient clipping (see reel/core/schedule.h).
#include "reel/core/schedule.h"

#include <cmath>
#include <cstdint>
#include <numbers>

#include "reel/update_rule.h"

namespace reel::core {

Result<LrSchedule> LrSchedule::Create(const LrScheduleConfig& c) {
  LrScheduleConfig config = c;
  if (config.schedule.empty()) config.schedule = "constant";
  if (!(config.base > 0.0))
    return InvalidArgumentError("learning_rate.base must be > 0, got " + std::to_string(c.base));
  if (config.warmup_steps < 0)
    return InvalidArgumentError("learning_rate.warmup_steps must be >= 0");
  if (config.total_steps < 0 || config.total_epochs < 0)
    return InvalidArgumentError("learning_rate.total_steps and total_epochs must be >= 0");
  if (config.schedule == "exponential") {
    if (config.decay_steps <= 0)
      return InvalidArgumentError(
          "learning_rate.decay_steps must be > 0 for the exponential "
          "schedule");
    if (!(config.decay_rate > 0.0))
      return InvalidArgumentError("learning_rate.decay_rate must be > 0");
  } else if (config.schedule == "cosine") {
    if (config.total_steps <= 0 && config.total_epochs <= 0)
      return InvalidArgumentError(
          "the cosine schedule needs a budget to anneal over: trainer.steps or trainer.epochs");
    if (config.min_lr < 0 || config.min_lr > config.base)
      return InvalidArgumentError("learning_rate.min_lr must be in [0, base]");
  } else if (config.schedule != "constant") {
    return InvalidArgumentError("learning_rate.schedule '" + config.schedule +
                                "' is unknown (known: constant, exponential, cosine)");
  }
  return LrSchedule(std::move(config));
}

double LrSchedule::At(int64_t step, int64_t epoch) const {
  const LrScheduleConfig& c = config_;
  if (step < c.warmup_steps)
    return c.base * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  if (c.schedule == "exponential")
    return c.base * std::pow(c.decay_rate, static_cast<double>(step / c.decay_steps));
  if (c.schedule == "cosine") {
    double t;
    if (c.total_steps > 0) {
      const double span = static_cast<double>(std::max<int64_t>(1, c.total_steps - c.warmup_steps));
      t = static_cast<double>(step - c.warmup_steps) / span;
    } else {
      t = static_cast<double>(epoch) / static_cast<double>(c.total_epochs);
    }
    t = std::min(1.0, t);
    return c.min_lr + (c.base - c.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
  }
  return c.base;
}

// The norm as every update rule's ApplySummingSquares gives it (reel/update_rule.h), so a run
// reports the same norm with clipping or without; the scaling is split over the OpenMP threads
// like an update.
void ScaleToGlobalNorm(std::span<float> grads, double norm, double max_norm) {
  if (!(max_norm > 0.0 && norm > max_norm)) return;
  const float scale = static_cast<float>(max_norm / norm);
  const int64_t n = static_cast<int64_t>(grads.size());
  float* g = grads.data();
#pragma omp parallel for schedule(static) if (n >= int64_t{1} << 20)
  for (int64_t i = 0; i < n; ++i) g[i] *= scale;
}

double ClipByGlobalNorm(std::span<float> grads, double max_norm) {
  const double norm = std::sqrt(SumOfSquares(grads));
  ScaleToGlobalNorm(grads, norm, max_norm);
  return norm;
}

}  // namespace reel::core
