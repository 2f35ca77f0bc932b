// bfloat16 for the shared layers (ModelContext::precision kBf16): float to bf16 conversion, and
// row-major products of bf16 matrices accumulated in float on oneDNN's matmul primitive.
//
// A bf16 value is the upper half of a float (8 exponent bits, 7 stored mantissa bits), held here
// as uint16_t. Conversions round to nearest even; NaN stays NaN; as the hardware instruction
// (vcvtneps2bf16) does, denormal floats become zero of the same sign.
//
// Thread-safety: reentrant. GemmBf16 keeps one primitive per transpose/accumulate combination
// for the process (built on first use, runtime shapes), and runs it with the calling thread's
// OpenMP team (omp_get_max_threads()).
#ifndef REEL_LAYERS_BF16_H_
#define REEL_LAYERS_BF16_H_

#include <cstdint>
#include <cstring>

namespace reel::layers {

using bf16_t = uint16_t;

// One value, rounded to nearest even (the reference for the vector paths below).
inline bf16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((u >> 16) | 0x40u);  // NaN
  if ((u & 0x7f800000u) == 0) return static_cast<bf16_t>((u >> 16) & 0x8000u);  // zero, denormal
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_t>(u >> 16);
}
inline float FromBf16(bf16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// True where oneDNN runs bf16 products natively (AVX-512 BF16; AMX CPUs have it too).
bool CpuHasBf16();

// out[i] = ToBf16(in[i]) for n values (AVX-512 BF16's conversion where the CPU has it).
void ToBf16(const float* in, int64_t n, bf16_t* out);
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
