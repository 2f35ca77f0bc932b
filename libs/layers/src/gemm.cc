#include "reel/layers/gemm.h"

#include <dnnl.h>

#include <cassert>

namespace reel::layers {

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  [[maybe_unused]] dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k,
                                                 alpha, a, lda, b, ldb, beta, c, ldc);
  // Only a shape bug can fail here (the arguments are computed, never user input).
  assert(st == dnnl_success);
}

}  // namespace reel::layers
