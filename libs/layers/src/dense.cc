#include "reel/layers/dense.h"

#include <algorithm>
#include <cmath>

#include "reel/layers/gemm.h"
#include "reel/layers/init.h"

namespace reel::layers {

Status Dense::Declare(ParamArena& arena) {
  arena_ = &arena;
  REEL_ASSIGN_OR_RETURN(w_, arena.Declare(name_ + "/w", {in_, out_}));
  if (has_bias_) {
    REEL_ASSIGN_OR_RETURN(b_, arena.Declare(name_ + "/b", {out_}));
  }
  return Status::Ok();
}

void Dense::Initialize(uint64_t seed) {
  const float bound = std::sqrt(6.0f / static_cast<float>(in_ + out_));
  FillUniform(arena_->values(w_), bound, seed, arena_->block(w_).name);
  if (has_bias_) std::fill_n(arena_->values(b_).data(), out_, 0.0f);
}

void Dense::Forward(const float* x, int64_t batch, float* y) const {
  const float* w = arena_->values().data() + arena_->block(w_).offset;
  const float* b = has_bias_ ? arena_->values().data() + arena_->block(b_).offset : nullptr;
  // A short batch adds the bias as it stores y (a serial copy of the bias into y took the second
  // thread's time at the MoE head's width).
  if (batch <= kShortBatch) return ShortGemm(batch, out_, in_, x, in_, w, out_, false, y, out_, b);
  if (b != nullptr)
    for (int64_t i = 0; i < batch; ++i) std::copy_n(b, out_, y + i * out_);
  Gemm(false, false, batch, out_, in_, 1.0f, x, in_, w, out_, b != nullptr ? 1.0f : 0.0f, y, out_);
}

void Dense::Backward(const float* x, const float* dy, int64_t batch, float* dx,
                     bool accumulate_dx) {
  float* dw = arena_->grads(w_).data();
  float* db = has_bias_ ? arena_->grads(b_).data() : nullptr;
  const float* w = arena_->values(w_).data();
  if (batch <= kShortBatch) {
    ShortGemmAtB(in_, out_, batch, x, in_, dy, out_, /*accumulate=*/false, dw, out_, db);
    if (dx != nullptr) ShortGemmABt(batch, in_, out_, dy, out_, w, out_, accumulate_dx, dx, in_);
    return;
  }
  Gemm(true, false, in_, out_, batch, 1.0f, x, in_, dy, out_, 0.0f, dw, out_);
  if (has_bias_) {
    std::fill_n(db, out_, 0.0f);
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t j = 0; j < out_; ++j) db[j] += dy[i * out_ + j];
  }
  if (dx != nullptr)
    Gemm(false, true, batch, in_, out_, 1.0f, dy, out_, w, out_, accumulate_dx ? 1.0f : 0.0f, dx,
         in_);
}

}  // namespace reel::layers
