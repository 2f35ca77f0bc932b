// Row-major single-precision matrix multiply for the shared layers, on oneDNN's dnnl_sgemm.
//
// Thread-safety: reentrant; oneDNN parallelises internally with its own (OpenMP) threads.
#ifndef REEL_LAYERS_GEMM_H_
#define REEL_LAYERS_GEMM_H_

#include <cstdint>

namespace reel::layers {

// C[M,N] = alpha * op(A) * op(B) + beta * C, all row-major; op(X) is X or X^T as trans_x says.
// lda/ldb/ldc are the row strides of A, B, C as stored.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace reel::layers

#endif  // REEL_LAYERS_GEMM_H_
