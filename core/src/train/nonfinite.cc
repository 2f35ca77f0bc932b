// The trainer's non-finite check (see train/nonfinite.h).
#include "train/nonfinite.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace reel::core {

bool AllFinite(std::span<const float> values) {
  constexpr uint32_t kExponent = 0x7f800000u;  // all ones: inf or NaN
  uint32_t bad = 0;
  for (const float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bad |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  return bad == 0;
}

std::string FirstNonFiniteGradient(const ParamArena& arena) {
  const std::span<const float> grads = arena.grads();
  for (const ParamArena::Block& b : arena.blocks())
    for (int64_t i = 0; i < b.size; ++i)
      if (!std::isfinite(grads[static_cast<size_t>(b.offset + i)]))
        return b.name + "[" + std::to_string(i) + "]";
  return "";
}

}  // namespace reel::core
