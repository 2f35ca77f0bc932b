// The trainer's non-finite check of a gradient the optimizer reduces during backward
// (trainer.stop_on_nonfinite, docs/training.md; GradientSink, reel/model.h): each reported range
// is checked before it is passed on, while it is still this rank's own, and what the model did
// not report is checked after Backward(), before Step() sends it. The arena's gradient is never
// read after it was passed on, when the optimizer may be reducing it in place.
#ifndef REEL_CORE_SRC_TRAIN_GRADIENT_CHECK_H_
#define REEL_CORE_SRC_TRAIN_GRADIENT_CHECK_H_

#include <string>
#include <vector>

#include "reel/model.h"
#include "reel/param_arena.h"

namespace reel::core {

// Checks whole blocks as they are reported, then passes the range on to `next`.
class CheckedGradientSink final : public GradientSink {
 public:
  CheckedGradientSink(const ParamArena& arena, GradientSink& next);

  void GradientsReady(int64_t offset, int64_t size) override;

  // After Backward(): checks the blocks not reported and readies the next step. Returns where
  // the first non-finite element found in this step is ("w[17]"), empty when none was.
  std::string EndBackward();

 private:
  void Check(size_t block);

  const ParamArena& arena_;
  GradientSink& next_;
  std::vector<char> checked_;  // per block, this step
  std::string first_bad_;
};

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_GRADIENT_CHECK_H_
