// Dense (fully connected) layer y = x W + b over a batch, with parameters in a ParamArena.
//
// Blocks: "<name>/w" [in, out] and, when it has a bias, "<name>/b" [out].
// Ownership: keeps a pointer to the arena given to Declare(), which must outlive the layer.
// Thread-safety: one thread per instance.
#ifndef REEL_LAYERS_DENSE_H_
#define REEL_LAYERS_DENSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "reel/model.h"
#include "reel/param_arena.h"
#include "reel/status.h"

namespace reel::layers {

class Dense {
 public:
  Dense(std::string name, int64_t in, int64_t out, bool bias)
      : name_(std::move(name)), in_(in), out_(out), has_bias_(bias) {}

  Status Declare(ParamArena& arena);
  // Glorot-uniform weights (bound sqrt(6 / (in + out))), zero bias. REQUIRES: arena finalized.
  void Initialize(uint64_t seed);

  // y [batch, out] = x [batch, in] W + b (overwrites y).
  void Forward(const float* x, int64_t batch, float* y) const;
  // From dy [batch, out]: writes dW and db into the arena's grads (overwriting) and, when dx is
  // not null, dx [batch, in] (overwriting, or adding to it with accumulate_dx).
  void Backward(const float* x, const float* dy, int64_t batch, float* dx,
                bool accumulate_dx = false);
  // Tells `sink` (if any) that this layer's blocks hold their final gradient (reel/model.h).
  void ReportGradients(GradientSink* sink) const {
    ReportBlocks(sink, *arena_, w_, has_bias_ ? b_ : w_);
  }

  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

 private:
  std::string name_;
  int64_t in_, out_;
  bool has_bias_;
  ParamArena* arena_ = nullptr;
  ParamArena::BlockId w_ = -1, b_ = -1;
  // Batches up to this size take the short-batch products (gemm.h: ShortGemm...).
  static constexpr int64_t kShortBatch = 64;
};

}  // namespace reel::layers

#endif  // REEL_LAYERS_DENSE_H_
