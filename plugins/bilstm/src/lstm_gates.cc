// Picks the gate kernels for this CPU once (see lstm_gates.h).
#include "lstm_gates.h"

#include <cstddef>
#include <vector>

#include "reel/layers/vector_isa.h"

namespace reel::bilstm {
namespace {

struct Kernels {
  void (*forward)(const GatesStep&, const float*);
  void (*backward)(const GatesGradStep&, const float*);
};

Kernels Detect() {
  switch (layers::DetectVectorIsa()) {
    case layers::VectorIsa::kAvx512:
      return {gates_avx512::Forward, gates_avx512::Backward};
    case layers::VectorIsa::kAvx2:
      return {gates_avx2::Forward, gates_avx2::Backward};
    case layers::VectorIsa::kBaseline:
      break;
  }
  return {gates_base::Forward, gates_base::Backward};
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

const char* LstmGatesIsa() { return layers::VectorIsaName(layers::DetectVectorIsa()); }

}  // namespace reel::bilstm
