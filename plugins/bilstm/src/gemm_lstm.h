// One LSTM direction over a packed batch (packed_layout.h), built on large GEMMs:
//  - the input projections of every valid frame are one [rows x I] x [I x 4H] product;
//  - only the recurrent [n_t x H] x [H x 4H] products go step by step, each over the n_t
//    sequences running at step t (no padding row, no reversed copy: a backward-in-time direction
//    visits the steps T-1..0 and every sequence joins at its own last frame with zero state);
//  - the gate nonlinearities and the state update are one fused pass per step (lstm_gates.h);
//  - on the way back the weight gradients are one product each, dWx = X^T dA and dWh = Hprev^T dA,
//    and the input gradient dA Wx^T is left to the caller (it sums both directions, and the first
//    layer needs none).
// The products run on oneDNN's dnnl_sgemm (layers::Gemm) with the calling thread's OpenMP thread
// count.
//
// Weights as DnnlLstm's: wx [I, 4H], wh [H, 4H], bias [4H], gate order i, f, c~, o.
//
// Thread-safety: one thread per instance (it keeps the last Forward()'s activations).
#ifndef REEL_PLUGINS_BILSTM_SRC_GEMM_LSTM_H_
#define REEL_PLUGINS_BILSTM_SRC_GEMM_LSTM_H_

#include <cstdint>
#include <vector>

#include "packed_layout.h"

namespace reel::bilstm {

// Seconds spent per phase (accumulated until reset): the large products (input projections and
// the weight and input gradients), the per-step recurrent products, the fused gate passes.
struct LstmPhases {
  double projections = 0, recurrence = 0, gates = 0;
};

class GemmLstm {
 public:
  // reverse=false reads each sequence from its first frame, true from its last.
  GemmLstm(int64_t input, int64_t hidden, bool reverse);

  // h [rows, h_ld] (columns [0, H) written) from x [rows, I], both packed by `layout`.
  void Forward(const PackedLayout& layout, const float* x, const float* wx, const float* wh,
               const float* bias, float* h, int64_t h_ld);

  // REQUIRES: the last Forward() ran on this layout, x, weights and h. From dh [rows, dh_ld] (the
  // gradient reaching h from outside the recurrence) writes dwx, dwh, dbias (overwritten); then
  // dgates() holds the gradient of the gate pre-activations [rows, 4H].
  void Backward(const PackedLayout& layout, const float* x, const float* wh, const float* h,
                int64_t h_ld, const float* dh, int64_t dh_ld, float* dwx, float* dwh, float* dbias);
  const float* dgates() const { return gates_.data(); }

  int64_t input() const { return input_; }
  int64_t hidden() const { return hidden_; }
  const LstmPhases& phases() const { return phases_; }
  void ResetPhases() { phases_ = {}; }

 private:
  // The time step visited p-th, and the rows of step p that carry state from step p-1.
  int64_t TimeAt(const PackedLayout& layout, int64_t p) const {
    return reverse_ ? layout.steps() - 1 - p : p;
  }
  int64_t CarriedRows(const PackedLayout& layout, int64_t p) const;

  int64_t input_, hidden_;
  bool reverse_;
  LstmPhases phases_;
  // Of the last Forward(), packed [rows, .]: gate activations (their gradients after
  // Backward()), cell states and their tanh.
  std::vector<float> gates_, c_, tanh_c_;
  // Backward scratch: previous hidden states aligned with the rows, carried gradients [B, H],
  // Wh transposed.
  std::vector<float> h_prev_, dh_rec_, dc_a_, dc_b_, wh_t_;
};

}  // namespace reel::bilstm

#endif  // REEL_PLUGINS_BILSTM_SRC_GEMM_LSTM_H_
