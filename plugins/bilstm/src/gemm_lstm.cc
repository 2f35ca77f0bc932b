#include "gemm_lstm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "lstm_gates.h"
#include "reel/layers/gemm.h"

namespace reel::bilstm {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the time since `start` to `phase` and restarts `start`.
void Lap(Clock::time_point& start, double& phase) {
  const Clock::time_point now = Clock::now();
  phase += std::chrono::duration<double>(now - start).count();
  start = now;
}

}  // namespace

GemmLstm::GemmLstm(int64_t input, int64_t hidden, bool reverse, bool bf16)
    : input_(input), hidden_(hidden), reverse_(reverse), bf16_(bf16) {}

int64_t GemmLstm::CarriedRows(const PackedLayout& layout, int64_t p) const {
  if (p == 0) return 0;
  return std::min(layout.batch_size(TimeAt(layout, p)), layout.batch_size(TimeAt(layout, p - 1)));
}

void GemmLstm::Forward(const PackedLayout& layout, const float* x, const float* wx, const float* wh,
                       const float* bias, float* h, int64_t h_ld, const layers::bf16_t* x_bf16) {
  const int64_t rows = layout.rows(), hn = hidden_, g4 = 4 * hidden_;
  gates_.resize(static_cast<size_t>(rows * g4));
  c_.resize(static_cast<size_t>(rows * hn));
  tanh_c_.resize(c_.size());
  Clock::time_point start = Clock::now();
  if (bf16_) {
    wx_bf_.resize(static_cast<size_t>(input_ * g4));
    wh_bf_.resize(static_cast<size_t>(hn * g4));
    h_bf_.resize(static_cast<size_t>(rows * hn));
    layers::ToBf16(wx, input_ * g4, wx_bf_.data());
    layers::ToBf16(wh, hn * g4, wh_bf_.data());
    layers::GemmBf16(false, false, rows, g4, input_, x_bf16, input_, wx_bf_.data(), g4, false,
                     gates_.data(), g4);
  } else {
    layers::Gemm(false, false, rows, g4, input_, 1.0f, x, input_, wx, g4, 0.0f, gates_.data(), g4);
  }
  Lap(start, phases_.projections);
  for (int64_t p = 0; p < layout.steps(); ++p) {
    const int64_t t = TimeAt(layout, p), n = layout.batch_size(t), np = CarriedRows(layout, p);
    const int64_t tp = p > 0 ? TimeAt(layout, p - 1) : t;
    float* g = gates_.data() + layout.offset(t) * g4;
    if (np > 0) {
      if (bf16_)
        layers::GemmBf16(false, false, np, g4, hn, h_bf_.data() + layout.offset(tp) * hn, hn,
                         wh_bf_.data(), g4, true, g, g4);
      else
        layers::Gemm(false, false, np, g4, hn, 1.0f, h + layout.offset(tp) * h_ld, h_ld, wh, g4,
                     1.0f, g, g4);
      Lap(start, phases_.recurrence);
    }
    GatesStep s;
    s.rows = n, s.n_prev = np, s.hidden = hn, s.gates = g, s.bias = bias;
    s.c_prev = c_.data() + layout.offset(tp) * hn;
    s.c = c_.data() + layout.offset(t) * hn;
    s.tanh_c = tanh_c_.data() + layout.offset(t) * hn;
    s.h = h + layout.offset(t) * h_ld, s.h_ld = h_ld;
    LstmGatesForward(s);
    if (bf16_) layers::ToBf16Rows(s.h, h_ld, n, hn, h_bf_.data() + layout.offset(t) * hn, hn);
    Lap(start, phases_.gates);
  }
}

void GemmLstm::Backward(const PackedLayout& layout, const float* x, const float* wh, const float* h,
                        int64_t h_ld, const float* dh, int64_t dh_ld, float* dwx, float* dwh,
                        float* dbias, const layers::bf16_t* x_bf16) {
  const int64_t rows = layout.rows(), hn = hidden_, g4 = 4 * hidden_, steps = layout.steps();
  const size_t state = static_cast<size_t>(layout.batch() * hn);
  dh_rec_.resize(state);
  dc_a_.resize(state);
  dc_b_.resize(state);
  std::fill_n(dbias, g4, 0.0f);
  // Wh^T [4H, H] once: the per-step products dA Wh^T then run as plain NN products, which
  // dnnl_sgemm does ~1.4x faster at the video shape than reading Wh transposed (single thread).
  auto transpose = [&](const auto* w, auto& out) {
    out.resize(static_cast<size_t>(g4 * hn));
    for (int64_t r = 0; r < hn; ++r)
      for (int64_t c = 0; c < g4; ++c) out[static_cast<size_t>(c * hn + r)] = w[r * g4 + c];
  };
  if (bf16_) {
    transpose(wh_bf_.data(), wh_t_bf_);  // the bf16 weights the last Forward made
    h_prev_bf_.resize(static_cast<size_t>(rows * hn));
    dgates_bf_.resize(static_cast<size_t>(rows * g4));
  } else {
    transpose(wh, wh_t_);
    h_prev_.resize(static_cast<size_t>(rows * hn));
  }
  float* dc_in = dc_a_.data();
  float* dc_out = dc_b_.data();
  Clock::time_point start = Clock::now();
  for (int64_t p = steps; p-- > 0;) {
    const int64_t t = TimeAt(layout, p), n = layout.batch_size(t), np = CarriedRows(layout, p);
    const int64_t tp = p > 0 ? TimeAt(layout, p - 1) : t;
    float* g = gates_.data() + layout.offset(t) * g4;
    GatesGradStep s;
    s.rows = n, s.n_prev = np, s.hidden = hn;
    s.n_carry = p + 1 < steps ? CarriedRows(layout, p + 1) : 0;
    s.gates = g;
    s.c_prev = c_.data() + layout.offset(tp) * hn;
    s.tanh_c = tanh_c_.data() + layout.offset(t) * hn;
    s.dh = dh + layout.offset(t) * dh_ld, s.dh_ld = dh_ld;
    s.dh_rec = dh_rec_.data(), s.dc_in = dc_in, s.dc_out = dc_out, s.dbias = dbias;
    LstmGatesBackward(s);
    std::swap(dc_in, dc_out);
    // The previous hidden states of this step's rows, aligned with them for dWh's one product.
    if (bf16_) {
      layers::bf16_t* hp = h_prev_bf_.data() + layout.offset(t) * hn;
      std::memcpy(hp, h_bf_.data() + layout.offset(tp) * hn,
                  static_cast<size_t>(np * hn) * sizeof(layers::bf16_t));
      std::fill(hp + np * hn, hp + n * hn, layers::bf16_t{0});
      layers::ToBf16(g, n * g4, dgates_bf_.data() + layout.offset(t) * g4);
    } else {
      float* hp = h_prev_.data() + layout.offset(t) * hn;
      for (int64_t r = 0; r < np; ++r)
        std::memcpy(hp + r * hn, h + (layout.offset(tp) + r) * h_ld,
                    static_cast<size_t>(hn) * sizeof(float));
      std::fill(hp + np * hn, hp + n * hn, 0.0f);
    }
    Lap(start, phases_.gates);
    if (np > 0) {
      if (bf16_)
        layers::GemmBf16(false, false, np, hn, g4, dgates_bf_.data() + layout.offset(t) * g4, g4,
                         wh_t_bf_.data(), hn, false, dh_rec_.data(), hn);
      else
        layers::Gemm(false, false, np, hn, g4, 1.0f, g, g4, wh_t_.data(), hn, 0.0f, dh_rec_.data(),
                     hn);
      Lap(start, phases_.recurrence);
    }
  }
  if (bf16_) {
    layers::GemmBf16(true, false, input_, g4, rows, x_bf16, input_, dgates_bf_.data(), g4, false,
                     dwx, g4);
    layers::GemmBf16(true, false, hn, g4, rows, h_prev_bf_.data(), hn, dgates_bf_.data(), g4, false,
                     dwh, g4);
  } else {
    layers::Gemm(true, false, input_, g4, rows, 1.0f, x, input_, gates_.data(), g4, 0.0f, dwx, g4);
    layers::Gemm(true, false, hn, g4, rows, 1.0f, h_prev_.data(), hn, gates_.data(), g4, 0.0f, dwh,
                 g4);
  }
  Lap(start, phases_.projections);
}

}  // namespace reel::bilstm
