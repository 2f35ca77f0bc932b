// The core's training loss: per-class sigmoid cross-entropy on logits, summed over classes and
// averaged over the batch (the YouTube-8M starter code's loss). Lives in the core so every model
// is trained and scored the same way.
//
// Stateless functions; safe from any thread.
#ifndef REEL_CORE_LOSS_H_
#define REEL_CORE_LOSS_H_

#include <cstdint>
#include <span>

#include "reel/batch.h"
#include "reel/status.h"
#include "reel/tensor.h"

namespace reel::core {

// The loss of one batch and its gradient with respect to the logits (what Model::Backward takes).
struct LossResult {
  double loss = 0.0;  // mean over the batch of the per-video sum over classes
  Tensor dlogits;     // dLoss/dlogits, [B, C]
};

// Computes the loss for `logits` [B, C] against the batch's CSR labels, in the stable form
// max(x, 0) - x*y + log(1 + exp(-|x|)), and its gradient (sigmoid(x) - y) / B.
// Errors: InvalidArgument when the shapes disagree or a label is outside [0, C).
Result<LossResult> SigmoidCrossEntropy(const Tensor& logits, const Batch& batch);

// Same, with the labels given directly in CSR form (offsets [B+1], ids).
Result<LossResult> SigmoidCrossEntropy(const Tensor& logits, std::span<const int64_t> label_offsets,
                                       std::span<const int32_t> label_ids);

// Elementwise logistic function, in place.
void SigmoidInPlace(std::span<float> values);

}  // namespace reel::core

#endif  // REEL_CORE_LOSS_H_
