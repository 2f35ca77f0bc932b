// The trainer's non-finite check (see train/nonfinite.h).
#include "train/nonfinite.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace reel::core {

bool AllFinite(std::span<const float> values) {
  constexpr uint32_t kExponent = 0x7f800000u;  // all ones: inf or NaN
  auto bad = [&](size_t i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    return static_cast<uint32_t>((bits & kExponent) == kExponent);
  };
  // Blocks of 8: gcc's -O2 cost model vectorises this loop, not the plain one (-fopt-info-vec).
  uint32_t any = 0;
  size_t i = 0;
  for (; i + 8 <= values.size(); i += 8) {
    uint32_t block = 0;
    for (size_t j = 0; j < 8; ++j) block |= bad(i + j);
    any |= block;
  }
  for (; i < values.size(); ++i) any |= bad(i);
  return any == 0;
}

std::string FirstNonFinite(const ParamArena& arena, std::span<const float> buffer) {
  for (const ParamArena::Block& b : arena.blocks())
    for (int64_t i = 0; i < b.size; ++i)
      if (!std::isfinite(buffer[static_cast<size_t>(b.offset + i)]))
        return b.name + "[" + std::to_string(i) + "]";
  return "";
}

}  // namespace reel::core
