// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) with runtime dispatch: the SSE4.2 crc32
// instruction when the CPU has it, else a slicing-by-8 table. The choice is made once, on first
// use.
#include <array>
#include <cstring>

#include "reel/recordio.h"

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define REEL_CRC32C_X86 1
#endif

namespace reel::recordio {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};
constexpr Tables kTables;

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // unaligned-safe; little-endian hosts only (x86, arm64)
  return v;
}

#ifdef REEL_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const void* data,
                                                          size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  // Align to 8 bytes, then the 8-byte instruction; unrolled so the loop overhead hides behind the
  // instruction's 3-cycle latency.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  while (n >= 32) {
    c = _mm_crc32_u64(c, Load64(p));
    c = _mm_crc32_u64(c, Load64(p + 8));
    c = _mm_crc32_u64(c, Load64(p + 16));
    c = _mm_crc32_u64(c, Load64(p + 24));
    p += 32;
    n -= 32;
  }
  while (n >= 8) {
    c = _mm_crc32_u64(c, Load64(p));
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c);
}
#endif

using ExtendFn = uint32_t (*)(uint32_t, const void*, size_t);

ExtendFn Choose() {
#ifdef REEL_CRC32C_X86
  if (__builtin_cpu_supports("sse4.2")) return &ExtendHardware;
#endif
  return &Crc32cExtendPortable;
}

ExtendFn Chosen() {
  static const ExtendFn fn = Choose();
  return fn;
}

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  const auto& t = kTables.t;
  uint32_t c = ~crc;
  while (n >= 8) {
    uint64_t v = Load64(p) ^ c;
    c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
        t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    --n;
  }
  return ~c;
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) { return Chosen()(crc, data, n); }

bool Crc32cHardwareAvailable() { return Chosen() != &Crc32cExtendPortable; }

}  // namespace reel::recordio
