// Picks the MoE kernels for this CPU (see moe_kernels.h).
#include "moe_kernels.h"

#include <omp.h>

#include <algorithm>

#include "reel/layers/vector_isa.h"

namespace reel::layers {
namespace {

// Runs f(part, first) on `items` split into one contiguous part per OpenMP thread of the caller's
// team (models set its size to their thread budget), each part a whole number of 16-item blocks:
// at the audio BiLSTM's shape the head's element-wise work is as large as a direction's gates, and
// the second thread would otherwise wait. Small inputs stay on the calling thread.
template <typename F>
void ForParts(const MoeItems& items, F&& f) {
  const int threads = items.n >= 8192 ? omp_get_max_threads() : 1;
  const int64_t per = (items.n / threads + 15) / 16 * 16;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const int64_t first = t * per, last = std::min(items.n, first + per);
    if (first < last)
      f(MoeItems{items.z + first * (items.experts + 1), items.a + first * items.experts,
                 last - first, items.experts},
        first);
  }
}

// One instruction set's kernels, picked once for this CPU.
struct Kernels {
  void (*logits)(const MoeItems&, float*);
  void (*grads)(const MoeItems&, const float*, float*, float*);
};

const Kernels& Selected() {
  static const Kernels kernels = [] {
    switch (DetectVectorIsa()) {
      case VectorIsa::kAvx512:
        return Kernels{moe_avx512::Logits, moe_avx512::LogitGrads};
      case VectorIsa::kAvx2:
        return Kernels{moe_avx2::Logits, moe_avx2::LogitGrads};
      case VectorIsa::kBaseline:
        break;
    }
    return Kernels{moe_base::Logits, moe_base::LogitGrads};
  }();
  return kernels;
}

}  // namespace

void MoeLogits(const MoeItems& items, float* logits) {
  ForParts(items,
           [&](const MoeItems& part, int64_t first) { Selected().logits(part, logits + first); });
}

void MoeLogitGrads(const MoeItems& items, const float* dlogits, float* dz, float* da) {
  ForParts(items, [&](const MoeItems& part, int64_t first) {
    Selected().grads(part, dlogits + first, dz + first * (items.experts + 1),
                     da + first * items.experts);
  });
}

}  // namespace reel::layers
