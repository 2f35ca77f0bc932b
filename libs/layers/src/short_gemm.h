// The kernels behind reel/layers/gemm.h's ShortGemm, ShortGemmAtB and ShortGemmABt, per
// instruction set. Each
// computes the columns [n0, n1) of its product on the calling thread; short_gemm.cc splits the
// columns over the OpenMP threads and picks the set (AVX-512 here; elsewhere dnnl_sgemm).
//
// Thread-safety: pure functions on caller-owned buffers; disjoint column ranges may run at once.
#ifndef REEL_LIBS_LAYERS_SRC_SHORT_GEMM_H_
#define REEL_LIBS_LAYERS_SRC_SHORT_GEMM_H_

#include <cstdint>

namespace reel::layers {

// C[rows, n] (+)= op(A) B, row-major. ShortGemm: A [rows, depth], B [depth, n]. ShortGemmAtB:
// A [depth, rows] (op(A) = A^T), B [depth, n].
struct ShortGemmArgs {
  int64_t rows = 0, n = 0, depth = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;      // C += product instead of C = product
  float* b_sums = nullptr;      // ShortGemmAtB: when set, also B's column sums [n] (overwritten)
  const float* bias = nullptr;  // Product: when set, also adds this row [n] to every row of C
};

// Tests: makes the public functions take their fallback route (dnnl_sgemm) on any CPU while set.
void ForceShortGemmFallbackForTesting(bool force);

namespace short_gemm_avx512 {
// True when this build has the kernels (an x86-64 compiler with AVX-512 flags); the caller checks
// the CPU runs them (vector_isa.h).
bool Compiled();
void Product(const ShortGemmArgs& args, int64_t n0, int64_t n1);     // A B, A with few rows
void ProductAtB(const ShortGemmArgs& args, int64_t n0, int64_t n1);  // A^T B, A with few rows
// For ShortGemmABt: rows [n0, n1) of CT [n, mp] = B [n, depth] AT [depth, mp], where AT is the
// short matrix transposed and zero-padded to mp = 16, 32, 48 or 64 columns.
void ProductBAt(const float* b, int64_t ldb, int64_t depth, const float* at, int64_t mp, float* ct,
                int64_t n0, int64_t n1);
// Rows [p0, p1) of AT [., mp] = A^T for A [m, .] (m <= mp <= 64), zero past column m.
void TransposeShort(const float* a, int64_t lda, int64_t m, int64_t mp, int64_t p0, int64_t p1,
                    float* at);
}  // namespace short_gemm_avx512

}  // namespace reel::layers

#endif  // REEL_LIBS_LAYERS_SRC_SHORT_GEMM_H_
