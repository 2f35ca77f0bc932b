// Model: a multi-label video classifier, from a Batch to logits [B, num_classes].
//
// Life of a model: the factory builds it from options; DeclareParams() names its parameter blocks
// in a ParamArena; the host finalizes the arena; Initialize() fills the values (deterministic
// under the seed). Then, per step: Forward() computes logits; the core's loss turns them into
// dlogits = dLoss/dlogits; Backward() writes dLoss/dparam for every block into arena.grads()
// (overwriting, not accumulating). The loss lives in the core, so every model is scored the same.
//
// Gradients as they are made (optional): a model may tell a GradientSink, set by the trainer,
// which ranges of arena.grads() Backward() has finished, last layer first, so an optimizer can
// start sending them while Backward() goes on (docs/distributed.md, "Overlapping the exchange
// with backward"). A model that does not report works unchanged: what is not reported is sent
// after Backward() returned.
//
// Ownership: the model keeps a pointer to the arena given to DeclareParams(), which must outlive
// it. Thread-safety: one thread per instance; separate instances are independent.
#ifndef REEL_MODEL_H_
#define REEL_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "reel/batch.h"
#include "reel/param_arena.h"
#include "reel/status.h"
#include "reel/tensor.h"

namespace reel {

// The arithmetic of a model's large products (trainer.precision, docs/training.md). kFp32: all
// float. kBf16: the products that dominate the step take bfloat16 inputs and accumulate in float;
// parameters, gradients, optimizer state, the loss and metrics stay float, so checkpoints are the
// same either way. A model without bf16 kernels computes in float under either value.
enum class Precision { kFp32, kBf16 };

// What the factory learns from the host about the run the model is built for.
struct ModelContext {
  int64_t num_classes = 3862;  // the width of the logits
  // Compute threads the model may use in Forward/Backward (e.g. OpenMP threads of its kernels);
  // 0: as many as the machine has. Set when several models train at once (the trials of
  // `reel tune`, ranks that share a host's cores), so they share the cores instead of
  // oversubscribing them; the host also sets the OpenMP team of the thread that calls the model
  // to it, so kernels sized by omp_get_max_threads() follow without reading it.
  int threads = 0;
  // Already resolved by the host for this CPU: kBf16 only where oneDNN runs bf16 kernels.
  Precision precision = Precision::kFp32;
};

// Receives ranges of arena.grads() as a model's Backward() finishes them (see the file comment).
class GradientSink {
 public:
  virtual ~GradientSink() = default;
  // arena.grads()[offset, offset + size) holds its final value for this Backward(): the model
  // writes there no more until the next Backward(), so the receiver may read and overwrite it
  // from now on. Called on the thread that called Backward(); only whole blocks count (a
  // block partly inside the range is sent after Backward()); a range reported twice in one
  // Backward() counts once.
  virtual void GradientsReady(int64_t offset, int64_t size) = 0;
};

// Reports arena blocks [first, last] (declared one after another, so their range is contiguous)
// to `sink`, if any: a model's GradientSink helper.
inline void ReportBlocks(GradientSink* sink, const ParamArena& arena, ParamArena::BlockId first,
                         ParamArena::BlockId last) {
  if (sink == nullptr) return;
  const int64_t begin = arena.block(first).offset;
  sink->GradientsReady(begin, arena.block(last).offset + arena.block(last).size - begin);
}

// kTrain: Backward() follows (keep what it needs); kInfer: logits only.
enum class Mode { kTrain, kInfer };

// A classifier built by a ModelFactory; its life is in the file comment.
class Model {
 public:
  virtual ~Model() = default;

  // Feature names the model reads from a batch, e.g. {"rgb"} or {"mean_rgb", "mean_audio"}.
  virtual std::vector<std::string> InputFeatures() const = 0;

  virtual Status DeclareParams(ParamArena& arena) = 0;
  // REQUIRES: the arena is finalized.
  virtual Status Initialize(uint64_t seed) = 0;

  // Logits [B, num_classes]. Errors: InvalidArgument naming the feature when the batch lacks it,
  // has the wrong width, or a length outside 1..T. In kTrain mode the model keeps what Backward()
  // needs until the next Forward().
  virtual Result<Tensor> Forward(const Batch& batch, Mode mode) = 0;

  // REQUIRES: the last call was Forward(batch, kTrain) with the same batch; dlogits [B, C].
  virtual Status Backward(const Batch& batch, const Tensor& dlogits) = 0;

  // Where Backward() reports finished gradient ranges from now on (null: nowhere); see the file
  // comment. The default ignores it: every range is then sent after Backward() returned.
  virtual void SetGradientSink(GradientSink* sink) { (void)sink; }
};

}  // namespace reel

#endif  // REEL_MODEL_H_
