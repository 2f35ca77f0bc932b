#include "gemm_lstm.h"

#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "lstm_gates.h"

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

Status Sgemm(const char* what, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) {
  const dnnl_status_t s = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a,
                                     lda, b, ldb, beta, c, ldc);
  if (s != dnnl_success)
    return InternalError(std::string("dnnl_sgemm failed for ") + what + " (" + std::to_string(m) +
                         "x" + std::to_string(n) + "x" + std::to_string(k) + "): status " +
                         std::to_string(static_cast<int>(s)));
  return Status::Ok();
}

GemmLstm::GemmLstm(int64_t input, int64_t hidden, bool reverse)
    : input_(input), hidden_(hidden), reverse_(reverse) {}

int64_t GemmLstm::CarriedRows(const PackedLayout& layout, int64_t p) const {
  if (p == 0) return 0;
  return std::min(layout.batch_size(TimeAt(layout, p)), layout.batch_size(TimeAt(layout, p - 1)));
}

Status GemmLstm::Forward(const PackedLayout& layout, const float* x, const float* wx,
                         const float* wh, const float* bias, float* h, int64_t h_ld) {
  const int64_t rows = layout.rows(), hn = hidden_, g4 = 4 * hidden_;
  gates_.resize(static_cast<size_t>(rows * g4));
  c_.resize(static_cast<size_t>(rows * hn));
  tanh_c_.resize(c_.size());
  Clock::time_point start = Clock::now();
  REEL_RETURN_IF_ERROR(Sgemm("the input projections", false, false, rows, g4, input_, x, input_, wx,
                             g4, 0.0f, gates_.data(), g4));
  Lap(start, phases_.projections);
  for (int64_t p = 0; p < layout.steps(); ++p) {
    const int64_t t = TimeAt(layout, p), n = layout.batch_size(t), np = CarriedRows(layout, p);
    const int64_t tp = p > 0 ? TimeAt(layout, p - 1) : t;
    float* g = gates_.data() + layout.offset(t) * g4;
    if (np > 0) {
      REEL_RETURN_IF_ERROR(Sgemm("a recurrent product", false, false, np, g4, hn,
                                 h + layout.offset(tp) * h_ld, h_ld, wh, g4, 1.0f, g, g4));
      Lap(start, phases_.recurrence);
    }
    GatesStep s;
    s.rows = n, s.n_prev = np, s.hidden = hn, s.gates = g, s.bias = bias;
    s.c_prev = c_.data() + layout.offset(tp) * hn;
    s.c = c_.data() + layout.offset(t) * hn;
    s.tanh_c = tanh_c_.data() + layout.offset(t) * hn;
    s.h = h + layout.offset(t) * h_ld, s.h_ld = h_ld;
    LstmGatesForward(s);
    Lap(start, phases_.gates);
  }
  return Status::Ok();
}

Status GemmLstm::Backward(const PackedLayout& layout, const float* x, const float* wh,
                          const float* h, int64_t h_ld, const float* dh, int64_t dh_ld, float* dwx,
                          float* dwh, float* dbias) {
  const int64_t rows = layout.rows(), hn = hidden_, g4 = 4 * hidden_, steps = layout.steps();
  const size_t state = static_cast<size_t>(layout.batch() * hn);
  dh_rec_.resize(state);
  dc_a_.resize(state);
  dc_b_.resize(state);
  h_prev_.resize(static_cast<size_t>(rows * hn));
  std::fill_n(dbias, g4, 0.0f);
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
    float* hp = h_prev_.data() + layout.offset(t) * hn;
    for (int64_t r = 0; r < np; ++r)
      std::memcpy(hp + r * hn, h + (layout.offset(tp) + r) * h_ld,
                  static_cast<size_t>(hn) * sizeof(float));
    std::fill(hp + np * hn, hp + n * hn, 0.0f);
    Lap(start, phases_.gates);
    if (np > 0) {
      REEL_RETURN_IF_ERROR(Sgemm("a recurrent gradient", false, true, np, hn, g4, g, g4, wh, g4,
                                 0.0f, dh_rec_.data(), hn));
      Lap(start, phases_.recurrence);
    }
  }
  REEL_RETURN_IF_ERROR(Sgemm("the input weight gradient", true, false, input_, g4, rows, x, input_,
                             gates_.data(), g4, 0.0f, dwx, g4));
  REEL_RETURN_IF_ERROR(Sgemm("the recurrent weight gradient", true, false, hn, g4, rows,
                             h_prev_.data(), hn, gates_.data(), g4, 0.0f, dwh, g4));
  Lap(start, phases_.projections);
  return Status::Ok();
}

}  // namespace reel::bilstm
