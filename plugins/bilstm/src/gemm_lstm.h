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
// count; in bf16 (ModelContext::precision) on oneDNN's matmul with bf16 inputs and float results
// (layers::GemmBf16): the input x (given converted by the caller, who shares it between the two
// directions), the weights (converted at each Forward) and the hidden states and gate gradients
// (converted step by step as they are made) enter the products as bf16, while the gates, cell
// states, and every gradient and weight stay float.
//
// Weights as DnnlLstm's: wx [I, 4H], wh [H, 4H], bias [4H], gate order i, f, c~, o.
//
// Thread-safety: one thread per instance (it keeps the last Forward()'s activations).
#ifndef REEL_PLUGINS_BILSTM_SRC_GEMM_LSTM_H_
#define REEL_PLUGINS_BILSTM_SRC_GEMM_LSTM_H_

#include <cstdint>
#include <vector>

#include "packed_layout.h"
#include "reel/layers/bf16.h"

namespace reel::bilstm {

// Seconds spent per phase (accumulated until reset): the large products (input projections and
// the weight and input gradients), the per-step recurrent products, the fused gate passes.
struct LstmPhases {
  double projections = 0, recurrence = 0, gates = 0;
};

class GemmLstm {
 public:
  // reverse=false reads each sequence from its first frame, true from its last; bf16: the
  // products in bf16 (the caller then passes x_bf16 too).
  GemmLstm(int64_t input, int64_t hidden, bool reverse, bool bf16 = false);

  // h [rows, h_ld] (columns [0, H) written) from x [rows, I], both packed by `layout`; in bf16
  // the products read x_bf16 (x as bf16, [rows, I]) instead of x.
  void Forward(const PackedLayout& layout, const float* x, const float* wx, const float* wh,
               const float* bias, float* h, int64_t h_ld, const layers::bf16_t* x_bf16 = nullptr);

  // REQUIRES: the last Forward() ran on this layout, x, weights and h. From dh [rows, dh_ld] (the
  // gradient reaching h from outside the recurrence) writes dwx, dwh, dbias (overwritten); then
  // dgates() holds the gradient of the gate pre-activations [rows, 4H] (in bf16 also
  // dgates_bf16(), and wx_bf16() the weights of the last Forward, for the input gradient).
  void Backward(const PackedLayout& layout, const float* x, const float* wh, const float* h,
                int64_t h_ld, const float* dh, int64_t dh_ld, float* dwx, float* dwh, float* dbias,
                const layers::bf16_t* x_bf16 = nullptr);
  const float* dgates() const { return gates_.data(); }
  const layers::bf16_t* dgates_bf16() const { return dgates_bf_.data(); }
  const layers::bf16_t* wx_bf16() const { return wx_bf_.data(); }

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
  bool reverse_, bf16_;
  LstmPhases phases_;
  // Of the last Forward(), packed [rows, .]: gate activations (their gradients after
  // Backward()), cell states and their tanh.
  std::vector<float> gates_, c_, tanh_c_;
  // Backward scratch: previous hidden states aligned with the rows, carried gradients [B, H],
  // Wh transposed.
  std::vector<float> h_prev_, dh_rec_, dc_a_, dc_b_, wh_t_;
  // bf16: the weights of the last Forward, Wh^T, the hidden states [rows, H] of the last
  // Forward, the previous hidden states aligned with the rows, and the gate gradients [rows, 4H].
  std::vector<layers::bf16_t> wx_bf_, wh_bf_, wh_t_bf_, h_bf_, h_prev_bf_, dgates_bf_;
};

}  // namespace reel::bilstm

#endif  // REEL_PLUGINS_BILSTM_SRC_GEMM_LSTM_H_
