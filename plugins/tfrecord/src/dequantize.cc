// YouTube-8M (de)quantization and batch stores (see dequantize.h).
#include "dequantize.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "reel/recordio.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace reel::tfrecord {
namespace {

constexpr float kScale = 4.0f / 255.0f;
constexpr float kBias = 4.0f / 512.0f - 2.0f;

struct Table {
  std::array<float, 256> v{};
  Table() {
    for (int q = 0; q < 256; ++q) v[q] = static_cast<float>(q) * kScale + kBias;
  }
};
const Table& DequantTable() {
  static const Table table;
  return table;
}

void DequantizePortable(const uint8_t* q, size_t n, float* out) {
  const auto& t = DequantTable().v;
  for (size_t i = 0; i < n; ++i) out[i] = t[q[i]];
}

#if defined(__x86_64__)
// 32 bytes to 32 floats. Multiply then add (no FMA) so the result matches the table bit for bit.
// Written out without arrays or loops: GCC at -O2 keeps an array of vectors on the stack.
template <bool kStream>
__attribute__((target("avx2"), always_inline)) inline void Store8(float* out, __m256 x) {
  if constexpr (kStream)
    _mm256_stream_ps(out, x);  // REQUIRES: out 32-byte aligned
  else
    _mm256_storeu_ps(out, x);
}

template <bool kStream>
__attribute__((target("avx2"), always_inline)) inline void Dequantize32(const uint8_t* q,
                                                                        float* out) {
  const __m256 scale = _mm256_set1_ps(kScale);
  const __m256 bias = _mm256_set1_ps(kBias);
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
  const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  const __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
  const __m256 c = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  const __m256 d = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
  Store8<kStream>(out, _mm256_add_ps(_mm256_mul_ps(a, scale), bias));
  Store8<kStream>(out + 8, _mm256_add_ps(_mm256_mul_ps(b, scale), bias));
  Store8<kStream>(out + 16, _mm256_add_ps(_mm256_mul_ps(c, scale), bias));
  Store8<kStream>(out + 24, _mm256_add_ps(_mm256_mul_ps(d, scale), bias));
}

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

__attribute__((target("avx2"))) void DequantizeAvx2(const uint8_t* q, size_t n, float* out,
                                                    StoreMode mode) {
  size_t i = 0;
  if (mode == StoreMode::kStreaming) {
    // Ordinary stores up to the first 32-byte boundary, then streaming ones.
    const size_t head = std::min(n, ((32 - reinterpret_cast<uintptr_t>(out) % 32) % 32) / 4);
    if (reinterpret_cast<uintptr_t>(out) % 4 == 0) {
      DequantizePortable(q, head, out);
      i = head;
      for (; i + 32 <= n; i += 32) Dequantize32<true>(q + i, out + i);
    }
  }
  for (; i + 32 <= n; i += 32) Dequantize32<false>(q + i, out + i);
  if (i < n) DequantizePortable(q + i, n - i, out + i);
}

// CRC32C of n bytes folded into `state` (the instruction's running register, i.e. the inverted
// CRC). Inline, for the few protobuf bytes between frames, where a call would cost more.
__attribute__((target("sse4.2"), always_inline)) inline uint64_t CrcBytes(uint64_t state,
                                                                          const uint8_t* p,
                                                                          size_t n) {
  for (; n >= 8; n -= 8, p += 8) state = _mm_crc32_u64(state, Load64(p));
  for (; n > 0; --n) state = _mm_crc32_u8(static_cast<uint32_t>(state), *p++);
  return state;
}

// Dequantize32 with the CRC32C of the same 32 bytes folded into `state`.
template <bool kStream>
__attribute__((target("avx2,sse4.2"))) uint64_t DequantizeCrcRun(const uint8_t* q, size_t n,
                                                                 float* out, uint64_t state) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    state = _mm_crc32_u64(state, Load64(q + i));
    state = _mm_crc32_u64(state, Load64(q + i + 8));
    state = _mm_crc32_u64(state, Load64(q + i + 16));
    state = _mm_crc32_u64(state, Load64(q + i + 24));
    Dequantize32<kStream>(q + i, out + i);
  }
  DequantizePortable(q + i, n - i, out + i);
  return CrcBytes(state, q + i, n - i);
}

__attribute__((target("avx2,sse4.2"))) uint32_t DequantizeWithCrcAvx2(
    std::string_view payload, std::span<const FrameSpan> spans, StoreMode mode) {
  const auto* cursor = reinterpret_cast<const uint8_t*>(payload.data());
  uint64_t state = 0xffffffffu;  // the CRC of nothing, inverted
  for (const FrameSpan& s : spans) {
    state = CrcBytes(state, cursor, static_cast<size_t>(s.src - cursor));
    const bool stream =
        mode == StoreMode::kStreaming && reinterpret_cast<uintptr_t>(s.dst) % 32 == 0;
    state = stream ? DequantizeCrcRun<true>(s.src, s.n, s.dst, state)
                   : DequantizeCrcRun<false>(s.src, s.n, s.dst, state);
    cursor = s.src + s.n;
  }
  const auto* end = reinterpret_cast<const uint8_t*>(payload.data() + payload.size());
  const size_t rest = static_cast<size_t>(end - cursor);
  // Records without frames (video level) are all "rest": the unrolled general CRC is faster.
  if (rest >= 256) return recordio::Crc32cExtend(~static_cast<uint32_t>(state), cursor, rest);
  return ~static_cast<uint32_t>(CrcBytes(state, cursor, rest));
}

__attribute__((target("avx2"))) void FillZeroStreaming(float* out, size_t n) {
  size_t i = std::min(n, ((32 - reinterpret_cast<uintptr_t>(out) % 32) % 32) / 4);
  if (reinterpret_cast<uintptr_t>(out) % 4 != 0) i = n;  // misaligned floats: no streaming
  std::fill(out, out + i, 0.0f);
  const __m256 zero = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(out + i, zero);
  std::fill(out + i, out + n, 0.0f);
}
#endif

using DequantFn = void (*)(const uint8_t*, size_t, float*, StoreMode);
void DequantizeAnyCpu(const uint8_t* q, size_t n, float* out, StoreMode) {
  DequantizePortable(q, n, out);
}

bool HaveAvx2() {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

bool HaveAvx2AndCrc() {
#if defined(__x86_64__)
  static const bool both = HaveAvx2() && __builtin_cpu_supports("sse4.2");
  return both;
#else
  return false;
#endif
}

}  // namespace

float Dequantize(uint8_t q) { return DequantTable().v[q]; }

uint8_t Quantize(float x) {
  float c = x > -2.0f ? (x < 2.0f ? x : 2.0f) : -2.0f;  // NaN maps to -2
  // The value is in [0, 255], so adding 0.5 and truncating rounds half up, as lround would;
  // written out because the library calls dominated `reel synth`.
  return static_cast<uint8_t>(static_cast<int>((c + 2.0f) * (255.0f / 4.0f) + 0.5f));
}

void DequantizeBytes(const uint8_t* q, size_t n, float* out, StoreMode mode) {
#if defined(__x86_64__)
  static const DequantFn fn = HaveAvx2() ? &DequantizeAvx2 : &DequantizeAnyCpu;
#else
  static const DequantFn fn = &DequantizeAnyCpu;
#endif
  fn(q, n, out, mode);
}

void FillZero(float* out, size_t n, StoreMode mode) {
#if defined(__x86_64__)
  if (mode == StoreMode::kStreaming && HaveAvx2()) return FillZeroStreaming(out, n);
#endif
  std::fill(out, out + n, 0.0f);
}

uint32_t DequantizeWithCrc(std::string_view payload, std::span<const FrameSpan> spans,
                           StoreMode mode) {
#if defined(__x86_64__)
  if (HaveAvx2AndCrc()) return DequantizeWithCrcAvx2(payload, spans, mode);
#endif
  for (const FrameSpan& s : spans) DequantizeBytes(s.src, s.n, s.dst, mode);
  return recordio::Crc32c(payload.data(), payload.size());
}

void StoreFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace reel::tfrecord
