// Picks the gate kernels for this CPU once (see lstm_gates.h).
#include "lstm_gates.h"

#include <cstddef>
#include <vector>

namespace reel::bilstm {
namespace {

struct Kernels {
  const char* isa;
  void (*forward)(const GatesStep&, const float*);
  void (*backward)(const GatesGradStep&, const float*);
};

Kernels Detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return {"avx512", gates_avx512::Forward, gates_avx512::Backward};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2", gates_avx2::Forward, gates_avx2::Backward};
#endif
  return {"baseline", gates_base::Forward, gates_base::Backward};
}

const Kernels& Selected() {
  static const Kernels kernels = Detect();
  return kernels;
}

// H zeros for rows without previous state or carried gradient; grows to the largest H seen.
const float* Zeros(int64_t hidden) {
  thread_local std::vector<float> zeros;
  if (static_cast<int64_t>(zeros.size()) < hidden) zeros.assign(static_cast<size_t>(hidden), 0.0f);
  return zeros.data();
}

}  // namespace

void LstmGatesForward(const GatesStep& s) { Selected().forward(s, Zeros(s.hidden)); }

void LstmGatesBackward(const GatesGradStep& s) { Selected().backward(s, Zeros(s.hidden)); }

const char* LstmGatesIsa() { return Selected().isa; }

}  // namespace reel::bilstm
