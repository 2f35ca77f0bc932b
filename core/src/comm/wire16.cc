// The 16-bit gradient wire (see wire16.h). bf16 converts with reel/bf16.h's ToBf16 (AVX-512
// BF16 where present); fp16's vector paths (F16C) give the scalar reference's bits.
#include "comm/wire16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "reel/bf16.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace reel::core {
namespace {

struct WireCpu {
  bool f16c = false;  // F16C and AVX2, with the AVX state saved by the OS
};

WireCpu DetectWireCpu() {
  WireCpu cpu;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && ((ecx >> 27) & 1u) && ((ecx >> 29) & 1u)) {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    cpu.f16c = (lo & 0x6u) == 0x6u && __builtin_cpu_supports("avx2");
  }
#endif
  return cpu;
}

const WireCpu& Cpu() {
  static const WireCpu cpu = DetectWireCpu();
  return cpu;
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void WireToFp16F16c(const float* in, size_t n, float inv,
                                                         uint16_t* out) {
  const __m256 s = _mm256_set1_ps(inv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(in + i), s),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = ToFp16(in[i] * inv);
}

__attribute__((target("avx2,f16c"))) void WireFromFp16F16c(const uint16_t* in, size_t n,
                                                           float scale, float* out, bool add) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))), s);
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) out[i] = add ? out[i] + FromFp16(in[i]) * scale : FromFp16(in[i]) * scale;
}
#endif

// The largest finite |x| (0 when none).
float MaxFiniteMagnitude(std::span<const float> x) {
  float m = 0.0f;
  for (float v : x) {
    const float a = std::fabs(v);
    m = (a <= std::numeric_limits<float>::max() && a > m) ? a : m;
  }
  return m;
}

// fp16's scale for a chunk whose largest finite magnitude is m: 2^e with m / 2^e in
// [2^14, 2^15), e kept where 2^e and 2^-e are normal floats.
float Fp16Scale(float m) {
  if (m == 0.0f) return 1.0f;
  int k;
  std::frexp(m, &k);  // m = f * 2^k, f in [0.5, 1)
  return std::ldexp(1.0f, std::clamp(k - 15, -126, 126));
}

}  // namespace

uint16_t ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (a >= 0x38800000u) {                                              // a normal fp16
    uint32_t r = a - 0x38000000u;                                      // rebias 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  // Subnormal or zero: the integer nearest |f| * 2^24, ties to even (the default rounding).
  float af;
  std::memcpy(&af, &a, sizeof af);
  volatile float t = af * 16777216.0f + 8388608.0f;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(t - 8388608.0f));
}

float FromFp16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0x1f) {
    x = sign | 0x7f800000u | (m << 13);
  } else if (e == 0) {
    const float f = static_cast<float>(m) * (1.0f / 16777216.0f);
    std::memcpy(&x, &f, sizeof x);
    x |= sign;
  } else {
    x = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

void EncodeChunk(WireFormat format, std::span<const float> in, std::span<std::byte> out) {
  const size_t n = in.size();
  const float scale = format == WireFormat::kFp16 ? Fp16Scale(MaxFiniteMagnitude(in)) : 1.0f;
  std::memcpy(out.data(), &scale, sizeof scale);
  // The header keeps the values 2-byte aligned wherever `out` is.
  uint16_t* v = reinterpret_cast<uint16_t*>(out.data() + kWireHeaderBytes);
  if (format == WireFormat::kBf16) return ToBf16(in.data(), static_cast<int64_t>(n), v);
  const float inv = 1.0f / scale;  // a power of two: exact
#if defined(__x86_64__)
  if (Cpu().f16c) return WireToFp16F16c(in.data(), n, inv, v);
#endif
  for (size_t i = 0; i < n; ++i) v[i] = ToFp16(in[i] * inv);
}

void DecodeChunk(WireFormat format, std::span<const std::byte> in, std::span<float> out, bool add) {
  const size_t n = out.size();
  float scale;
  std::memcpy(&scale, in.data(), sizeof scale);
  const uint16_t* v = reinterpret_cast<const uint16_t*>(in.data() + kWireHeaderBytes);
  float* o = out.data();
  if (format == WireFormat::kBf16) {
    // Widening is a shift: the compiler vectorises these loops.
    if (add) {
      for (size_t i = 0; i < n; ++i) o[i] += FromBf16(v[i]);
    } else {
      for (size_t i = 0; i < n; ++i) o[i] = FromBf16(v[i]);
    }
    return;
  }
#if defined(__x86_64__)
  if (Cpu().f16c) return WireFromFp16F16c(v, n, scale, o, add);
#endif
  for (size_t i = 0; i < n; ++i)
    o[i] = add ? o[i] + FromFp16(v[i]) * scale : FromFp16(v[i]) * scale;
}

void RoundThroughWire(WireFormat format, std::span<float> x, size_t block) {
  std::vector<std::byte> wire(EncodedBytes(std::min(block, x.size())));
  for (size_t at = 0; at < x.size(); at += block) {
    std::span<float> part = x.subspan(at, std::min(block, x.size() - at));
    EncodeChunk(format, part, wire);
    DecodeChunk(format, wire, part, /*add=*/false);
  }
}

}  // namespace reel::core
