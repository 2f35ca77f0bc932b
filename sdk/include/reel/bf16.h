// bfloat16 values and their conversions, shared by the layers' bf16 kernels (reel/layers/bf16.h)
// and the core's 16-bit gradient wire (docs/distributed.md, "Compression on the wire").
//
// A bf16 value is the upper half of a float (8 exponent bits, 7 stored mantissa bits), held as
// uint16_t. ToBf16 rounds to nearest even; NaN stays NaN; as the hardware instruction
// (vcvtneps2bf16) does, denormal floats become zero of the same sign.
//
// Thread-safety: reentrant.
#ifndef REEL_BF16_H_
#define REEL_BF16_H_

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>

#include "reel/cpu_bf16.h"
#endif

namespace reel {

using bf16_t = uint16_t;  // a bfloat16's bits

// One value, rounded to nearest even (the reference for every vector path).
inline bf16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((u >> 16) | 0x40u);  // NaN
  if ((u & 0x7f800000u) == 0) return static_cast<bf16_t>((u >> 16) & 0x8000u);  // zero, denormal
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_t>(u >> 16);
}
// The float a bf16 value stands for (exact).
inline float FromBf16(bf16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

#if defined(__x86_64__)
// 16 floats at a time with vcvtneps2bf16, which rounds to nearest even and flushes denormals:
// ToBf16's bits.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline void ToBf16Avx512(
    const float* in, int64_t n, bf16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<const __m256i&>(v));
  }
  if (i < n) {
    const __mmask16 rest = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(rest, in + i));
    _mm256_mask_storeu_epi16(out + i, rest, reinterpret_cast<const __m256i&>(v));
  }
}
#endif

// True where the CPU has AVX-512 BF16's conversion (read once per process).
inline bool CpuConvertsBf16() {
#if defined(__x86_64__)
  static const bool has = ReadCpuBf16Features().avx512_bf16;
  return has;
#else
  return false;
#endif
}

// out[i] = ToBf16(in[i]) for n values, with AVX-512 BF16's conversion where the CPU has it.
inline void ToBf16(const float* in, int64_t n, bf16_t* out) {
#if defined(__x86_64__)
  if (CpuConvertsBf16()) return ToBf16Avx512(in, n, out);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = ToBf16(in[i]);
}

}  // namespace reel

#endif  // REEL_BF16_H_
