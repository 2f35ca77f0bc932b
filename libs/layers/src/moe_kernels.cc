// Picks the MoE kernels for this CPU (see moe_kernels.h).
#include "moe_kernels.h"

#include <omp.h>

#include <algorithm>

#include "reel/layers/vector_isa.h"

namespace reel::layers {
namespace {

// Runs f(part, first) on `items` split into parts of whole 16-item blocks, about 8 per OpenMP
// thread of the caller's team (models set its size to their thread budget), which the threads
// take as they finish: at the audio BiLSTM's shape the head's element-wise work is as large as a
// direction's gates, and on a shared machine static halves left one thread waiting for the other.
// Small inputs stay on the calling thread.
template <typename F>
void ForParts(const MoeItems& items, F&& f) {
  const int threads = items.n >= 8192 ? omp_get_max_threads() : 1;
  const int64_t parts = threads == 1 ? 1 : 8 * threads;
  const int64_t per = ((items.n + parts - 1) / parts + 15) / 16 * 16;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t part = 0; part < parts; ++part) {
    const int64_t first = part * per, last = std::min(items.n, first + per);
    if (first < last)
      f(MoeItems{items.z + first * (items.experts + 1), items.a + first * items.experts,
                 last - first, items.experts},
        first);
  }
}

// One instruction set's kernel, picked once for this CPU.
using LogitsKernel = void (*)(const MoeItems&, float*, float*, float*);

LogitsKernel Selected() {
  static const LogitsKernel kernel = [] {
    switch (DetectVectorIsa()) {
      case VectorIsa::kAvx512:
        return moe_avx512::Logits;
      case VectorIsa::kAvx2:
        return moe_avx2::Logits;
      case VectorIsa::kBaseline:
        break;
    }
    return moe_base::Logits;
  }();
  return kernel;
}

}  // namespace

void MoeLogits(const MoeItems& items, float* logits, float* unit_dz, float* unit_da) {
  const int64_t e1 = items.experts + 1;
  ForParts(items, [&](const MoeItems& part, int64_t first) {
    Selected()(part, logits + first, unit_dz == nullptr ? nullptr : unit_dz + first * e1,
               unit_da == nullptr ? nullptr : unit_da + first * items.experts);
  });
}

void MoeLogitGrads(int64_t n, int64_t experts, const float* unit_dz, const float* unit_da,
                   const float* dlogits, float* dz, float* da) {
  const int64_t e1 = experts + 1;
#pragma omp parallel for schedule(static) if (n >= 8192)
  for (int64_t i = 0; i < n; ++i) {
    const float d = dlogits[i];
    for (int64_t r = 0; r < e1; ++r) dz[i * e1 + r] = d * unit_dz[i * e1 + r];
    for (int64_t r = 0; r < experts; ++r) da[i * experts + r] = d * unit_da[i * experts + r];
  }
}

}  // namespace reel::layers
