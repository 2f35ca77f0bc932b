// The LSTM cell's element-wise work for one time step, fused into one pass over the step's rows:
// the gate nonlinearities and the state update (forward), and their derivatives (backward).
//
// Rows are the sequences running at the step (packed layout, see packed_layout.h); a row's four
// gate blocks of H values are contiguous, in the order input, forget, candidate (c~), output
// (oneDNN's and PyTorch's). Rows i >= n_prev have no previous state (their sequence starts at this
// step): their previous cell state is zero.
//
// The loops are plain C++ written for the compiler's vectoriser (exp by range reduction and a
// polynomial, ~2 ulp; lstm_gates_kernels.inc). That source is compiled three times, for AVX-512,
// AVX2+FMA and the x86-64 baseline (lstm_gates_{avx512,avx2,base}.cc), and the first call picks
// the best the CPU has, so one binary serves every x86-64 machine at its own vector width.
//
// Thread-safety: pure functions on caller-owned buffers.
#ifndef REEL_PLUGINS_BILSTM_SRC_LSTM_GATES_H_
#define REEL_PLUGINS_BILSTM_SRC_LSTM_GATES_H_

#include <cstdint>

namespace reel::bilstm {

struct GatesStep {
  int64_t rows = 0;               // n: sequences running at this step
  int64_t n_prev = 0;             // rows 0..n_prev-1 carry state from the previous step
  int64_t hidden = 0;             // H
  float* gates = nullptr;         // [n, 4H]: pre-activations (minus bias) in, activations out
  const float* bias = nullptr;    // [4H]
  const float* c_prev = nullptr;  // [n_prev, H], the previous step's cell states
  float* c = nullptr;             // [n, H] out: cell states
  float* tanh_c = nullptr;        // [n, H] out: tanh of the cell states (kept for backward)
  float* h = nullptr;             // [n, h_ld] out: hidden states
  int64_t h_ld = 0;
};

// Forward: gates <- (sigmoid, sigmoid, tanh, sigmoid)(gates + bias); c = f*c_prev + i*c~;
// h = o*tanh(c).
void LstmGatesForward(const GatesStep& s);

struct GatesGradStep {
  int64_t rows = 0, n_prev = 0, hidden = 0;
  int64_t n_carry = 0;            // rows 0..n_carry-1 feed the next step (dh_rec, dc_in valid)
  float* gates = nullptr;         // [n, 4H]: activations in, pre-activation gradients out
  const float* c_prev = nullptr;  // [n_prev, H]
  const float* tanh_c = nullptr;  // [n, H]
  const float* dh = nullptr;      // [n, dh_ld]: gradient reaching h from outside the recurrence
  int64_t dh_ld = 0;
  const float* dh_rec = nullptr;  // [n_carry, H]: gradient reaching h through the next step
  const float* dc_in = nullptr;   // [n_carry, H]: gradient reaching c through the next step
  float* dc_out = nullptr;        // [n, H] out: gradient reaching c_prev (not aliasing dc_in)
  float* dbias = nullptr;         // [4H], accumulated
};

// Backward of LstmGatesForward() for one step.
void LstmGatesBackward(const GatesGradStep& s);

// "avx512", "avx2" or "baseline": the kernel variant this CPU runs.
const char* LstmGatesIsa();

// One instruction set's kernels (lstm_gates_kernels.inc), for the dispatcher. `zeros` holds at
// least H zeros and stands in for a missing previous state or carried gradient.
namespace gates_avx512 {
void Forward(const GatesStep& s, const float* zeros);
void Backward(const GatesGradStep& s, const float* zeros);
}  // namespace gates_avx512
namespace gates_avx2 {
void Forward(const GatesStep& s, const float* zeros);
void Backward(const GatesGradStep& s, const float* zeros);
}  // namespace gates_avx2
namespace gates_base {
void Forward(const GatesStep& s, const float* zeros);
void Backward(const GatesGradStep& s, const float* zeros);
}  // namespace gates_base

}  // namespace reel::bilstm

#endif  // REEL_PLUGINS_BILSTM_SRC_LSTM_GATES_H_
