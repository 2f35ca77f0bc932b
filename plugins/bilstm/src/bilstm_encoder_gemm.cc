// BiLstmEncoder's kGemm implementation (see bilstm_encoder.h and gemm_lstm.h): every layer works
// on the packed layout; layer k's input is layer k-1's packed [forward, backward] output as it is.
#include <chrono>
#include <utility>

#include "bilstm_encoder.h"
#include "reel/layers/gemm.h"

namespace reel::bilstm {

Status BiLstmEncoder::ForwardGemm(const Feature& feature) {
  const int64_t h = config_.hidden, width = config_.width;
  layout_ = PackedLayout(lengths_);
  const int64_t rows = layout_.rows();
  packed_input_.resize(static_cast<size_t>(rows * width));
  layout_.Pack(feature.values.data(), feature.values.dim(1), width, packed_input_.data());
  for (size_t k = 0; k < layers_.size(); ++k) {
    Layer& layer = layers_[k];
    const bool top = k + 1 == layers_.size();
    const float* in = k == 0 ? packed_input_.data() : layers_[k - 1].packed_out.data();
    layer.packed_out.resize(static_cast<size_t>(rows * 2 * h));
    if (top) {
      layer.fwd.out.resize(static_cast<size_t>(steps_ * batch_ * h));
      layer.bwd.out.resize(layer.fwd.out.size());
    }
    auto run = [&](Dir& d, int64_t col, bool reversed) {
      d.gemm->Forward(layout_, in, arena_->values(d.wx).data(), arena_->values(d.wh).data(),
                      arena_->values(d.b).data(), layer.packed_out.data() + col, 2 * h);
      // Pooling (and TopOutputs()) read [T, B, H] in each direction's own time order; each
      // direction's thread unpacks its own columns, so the copy runs on both cores.
      if (top) layout_.ToTbd(layer.packed_out.data() + col, 2 * h, h, reversed, d.out.data());
      return Status::Ok();
    };
    REEL_RETURN_IF_ERROR(
        RunBoth([&] { return run(layer.fwd, 0, false); }, [&] { return run(layer.bwd, h, true); }));
  }
  return Status::Ok();
}

Status BiLstmEncoder::BackwardGemm() {
  const int64_t h = config_.hidden, rows = layout_.rows();
  dpacked_.resize(static_cast<size_t>(rows * 2 * h));
  for (size_t k = layers_.size(); k-- > 0;) {
    Layer& layer = layers_[k];
    const bool top = k + 1 == layers_.size();
    const float* in = k == 0 ? packed_input_.data() : layers_[k - 1].packed_out.data();
    auto run = [&](Dir& d, const std::vector<float>& dout, int64_t col, bool reversed) {
      // The pooled gradient, [T, B, H] in the direction's own order, into its packed columns.
      if (top) layout_.FromTbd(dout.data(), h, reversed, dpacked_.data() + col, 2 * h);
      d.gemm->Backward(layout_, in, arena_->values(d.wh).data(), layer.packed_out.data() + col,
                       2 * h, dpacked_.data() + col, 2 * h, arena_->grads(d.wx).data(),
                       arena_->grads(d.wh).data(), arena_->grads(d.b).data());
      return Status::Ok();
    };
    REEL_RETURN_IF_ERROR(RunBoth([&] { return run(layer.fwd, dout_fwd_, 0, false); },
                                 [&] { return run(layer.bwd, dout_bwd_, h, true); }));
    if (k == 0) break;  // the features need no gradient
    // The gradient reaching layer k-1's outputs: dA_fwd Wx_fwd^T + dA_bwd Wx_bwd^T, on all threads.
    const auto start = std::chrono::steady_clock::now();
    const int64_t in_width = 2 * h, g4 = 4 * h;
    dpacked_next_.resize(static_cast<size_t>(rows * in_width));
    layers::Gemm(false, true, rows, in_width, g4, 1.0f, layer.fwd.gemm->dgates(), g4,
                 arena_->values(layer.fwd.wx).data(), g4, 0.0f, dpacked_next_.data(), in_width);
    layers::Gemm(false, true, rows, in_width, g4, 1.0f, layer.bwd.gemm->dgates(), g4,
                 arena_->values(layer.bwd.wx).data(), g4, 1.0f, dpacked_next_.data(), in_width);
    std::swap(dpacked_, dpacked_next_);
    input_grad_phases_.projections +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return Status::Ok();
}

LstmPhases BiLstmEncoder::phases() const {
  LstmPhases total = input_grad_phases_;
  for (const Layer& layer : layers_)
    for (const Dir* d : {&layer.fwd, &layer.bwd}) {
      if (!d->gemm) continue;
      total.projections += d->gemm->phases().projections / 2;
      total.recurrence += d->gemm->phases().recurrence / 2;
      total.gates += d->gemm->phases().gates / 2;
    }
  return total;
}

void BiLstmEncoder::ResetPhases() {
  input_grad_phases_ = {};
  for (Layer& layer : layers_)
    for (Dir* d : {&layer.fwd, &layer.bwd})
      if (d->gemm) d->gemm->ResetPhases();
}

}  // namespace reel::bilstm
