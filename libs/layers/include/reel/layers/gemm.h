// Row-major single-precision matrix multiply for the shared layers: Gemm on oneDNN's dnnl_sgemm,
// and ShortGemm / ShortGemmAtB for the products of a short batch with a wide weight matrix.
//
// Thread-safety: reentrant; both parallelise internally with the OpenMP threads of the caller's
// team size (omp_get_max_threads()).
#ifndef REEL_LAYERS_GEMM_H_
#define REEL_LAYERS_GEMM_H_

#include <cstdint>

namespace reel::layers {

// C[M,N] = alpha * op(A) * op(B) + beta * C, all row-major; op(X) is X or X^T as trans_x says.
// lda/ldb/ldc are the row strides of A, B, C as stored.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The three products of a dense layer at a short batch (a few dozen rows against thousands of
// columns, e.g. 32 videos through a 3862-class MoE head), which dnnl_sgemm 2.6 runs far below its
// rate. On CPUs with AVX-512 kernels of our own stream the wide matrix once, split over the
// threads; elsewhere they are Gemm. Each overwrites C, or adds to it with `accumulate`; any sizes
// (results equal Gemm's to float rounding), fastest with the short side <= 64.
//   ShortGemm:    C[m, n] (+)= A[m, k] B[k, n]    (m short: y = x W); with bias not null, also
//                 adds bias [n] to every row of C (in the same pass over C)
//   ShortGemmAtB: C[m, n] (+)= A[k, m]^T B[k, n]  (k short: dW = x^T dy); with b_col_sums not
//                 null, also writes B's column sums [n] there (db, from the same pass over dy)
//   ShortGemmABt: C[m, n] (+)= A[m, k] B[n, k]^T  (m short: dx = dy W^T)
void ShortGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, bool accumulate, float* c, int64_t ldc, const float* bias = nullptr);
void ShortGemmAtB(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc, float* b_col_sums = nullptr);
void ShortGemmABt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc);

}  // namespace reel::layers

#endif  // REEL_LAYERS_GEMM_H_
