// CRC32C: reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF.
#include "checkpoint/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace reel::core {
namespace {

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0u);
    t[i] = c;
  }
  return t;
}

uint32_t Software(const unsigned char* p, size_t n, uint32_t c) {
  static const std::array<uint32_t, 256> table = MakeTable();
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Hardware(const unsigned char* p, size_t n, uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c64);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
#endif

}  // namespace

uint32_t Crc32c(std::string_view data, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  uint32_t c = ~crc;
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  if (has_sse42) return ~Hardware(p, data.size(), c);
#endif
  return ~Software(p, data.size(), c);
}

}  // namespace reel::core
