// bfloat16 for the shared layers (ModelContext::precision kBf16): float to bf16 conversion, and
// row-major products of bf16 matrices accumulated in float on oneDNN's matmul primitive.
//
// bf16 values and the scalar conversion (round to nearest even, NaN kept, denormals to zero):
// reel/bf16.h; the vector conversions below give the same bits.
//
// Thread-safety: reentrant. GemmBf16 keeps one primitive per transpose/accumulate combination
// for the process (built on first use, runtime shapes), and runs it with the calling thread's
// OpenMP team (omp_get_max_threads()).
#ifndef REEL_LAYERS_BF16_H_
#define REEL_LAYERS_BF16_H_

#include <cstdint>

#include "reel/bf16.h"

namespace reel::layers {

// The conversions live in reel/bf16.h (the core's gradient wire uses them too): one value, and
// ToBf16(in, n, out) for n values.
using reel::bf16_t;
using reel::FromBf16;
using reel::ToBf16;

// True where oneDNN runs bf16 products natively (AVX-512 BF16; AMX CPUs have it too).
bool CpuHasBf16();

// The same for a [rows, cols] block read with row stride ld_in and written with ld_out.
void ToBf16Rows(const float* in, int64_t ld_in, int64_t rows, int64_t cols, bf16_t* out,
                int64_t ld_out);

// C[M,N] = op(A) op(B) (+ C when accumulate), A and B bf16, C float, all row-major with row
// strides lda/ldb/ldc as stored; op(X) is X or X^T as trans_x says. Products accumulate in float.
// REQUIRES: the CPU has bf16 kernels for oneDNN (AVX-512 BF16 or AMX): elsewhere oneDNN
// emulates them, correct but slower than Gemm.
void GemmBf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const bf16_t* a,
              int64_t lda, const bf16_t* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

}  // namespace reel::layers

#endif  // REEL_LAYERS_BF16_H_
