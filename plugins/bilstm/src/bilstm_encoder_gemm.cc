// BiLstmEncoder's kGemm implementation (see bilstm_encoder.h and gemm_lstm.h): every layer works
// on the packed layout; layer k's input is layer k-1's packed [forward, backward] output as it is.
#include <chrono>
#include <utility>

#include "bilstm_encoder.h"
#include "reel/layers/bf16.h"
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
    const float* in = k == 0 ? packed_input_.data() : layers_[k - 1].packed_out.data();
    const int64_t in_width = k == 0 ? width : 2 * h;
    if (config_.bf16) {  // once for both directions
      layer.packed_in_bf16.resize(static_cast<size_t>(rows * in_width));
      layers::ToBf16(in, rows * in_width, layer.packed_in_bf16.data());
    }
    layer.packed_out.resize(static_cast<size_t>(rows * 2 * h));
    auto run = [&](Dir& d, int64_t col) {
      d.gemm->Forward(layout_, in, arena_->values(d.wx).data(), arena_->values(d.wh).data(),
                      arena_->values(d.b).data(), layer.packed_out.data() + col, 2 * h,
                      layer.packed_in_bf16.data());
      return Status::Ok();
    };
    REEL_RETURN_IF_ERROR(
        RunBoth([&] { return run(layer.fwd, 0); }, [&] { return run(layer.bwd, h); }));
  }
  return Status::Ok();
}

// The pooling reads the top layer's packed outputs where they are: unpacking them to [T, B, H]
// (and packing the pooled gradient back) moved ~17 MB per direction and step at the audio shape,
// for a "last" pooling that reads one frame per video.
void BiLstmEncoder::PoolGemm(float* enc, int64_t enc_ld, int64_t col, bool backward_dir) {
  const int64_t h = config_.hidden;
  const int64_t side = backward_dir ? h : 0;
  layers::PoolForwardRows(config_.pooling, layers_.back().packed_out.data() + side, 2 * h,
                          layout_.Frames(backward_dir), batch_, h, lengths_, enc, enc_ld,
                          col + side, (backward_dir ? argmax_bwd_ : argmax_fwd_).data());
}

Status BiLstmEncoder::BackwardGemm(const float* denc, int64_t enc_ld, int64_t col) {
  const int64_t h = config_.hidden, rows = layout_.rows();
  dpacked_.resize(static_cast<size_t>(rows * 2 * h));
  for (size_t k = layers_.size(); k-- > 0;) {
    Layer& layer = layers_[k];
    const bool top = k + 1 == layers_.size();
    const float* in = k == 0 ? packed_input_.data() : layers_[k - 1].packed_out.data();
    auto run = [&](Dir& d, int64_t side, bool reversed) {
      // The pooled gradient straight into the direction's packed columns.
      if (top)
        layers::PoolBackwardRows(config_.pooling, denc, enc_ld, col + side, batch_, h, lengths_,
                                 (reversed ? argmax_bwd_ : argmax_fwd_).data(),
                                 dpacked_.data() + side, 2 * h, layout_.Frames(reversed));
      d.gemm->Backward(layout_, in, arena_->values(d.wh).data(), layer.packed_out.data() + side,
                       2 * h, dpacked_.data() + side, 2 * h, arena_->grads(d.wx).data(),
                       arena_->grads(d.wh).data(), arena_->grads(d.b).data(),
                       layer.packed_in_bf16.data());
      return Status::Ok();
    };
    REEL_RETURN_IF_ERROR(
        RunBoth([&] { return run(layer.fwd, 0, false); }, [&] { return run(layer.bwd, h, true); }));
    ReportBlocks(sink_, *arena_, layer.fwd.wx, layer.bwd.b);  // declared in this order
    if (k == 0) break;                                        // the features need no gradient
    // The gradient reaching layer k-1's outputs: dA_fwd Wx_fwd^T + dA_bwd Wx_bwd^T, on all threads.
    const auto start = std::chrono::steady_clock::now();
    const int64_t in_width = 2 * h, g4 = 4 * h;
    dpacked_next_.resize(static_cast<size_t>(rows * in_width));
    bool accumulate = false;
    for (const Dir* d : {&layer.fwd, &layer.bwd}) {
      if (config_.bf16)
        layers::GemmBf16(false, true, rows, in_width, g4, d->gemm->dgates_bf16(), g4,
                         d->gemm->wx_bf16(), g4, accumulate, dpacked_next_.data(), in_width);
      else
        layers::Gemm(false, true, rows, in_width, g4, 1.0f, d->gemm->dgates(), g4,
                     arena_->values(d->wx).data(), g4, accumulate ? 1.0f : 0.0f,
                     dpacked_next_.data(), in_width);
      accumulate = true;
    }
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
