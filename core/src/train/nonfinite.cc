// The trainer's non-finite check (see train/nonfinite.h).
#include "train/nonfinite.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace reel::core {

// Blocks of 8: gcc's -O2 cost model vectorises this loop, not the plain one (-fopt-info-vec).
// A large buffer (a model's gradient) is split over the OpenMP threads, as an update is
// (reel/update_rule.h): one thread does not reach the memory rate.
bool AllFinite(std::span<const float> values) {
  constexpr uint32_t kExponent = 0x7f800000u;  // all ones: inf or NaN
  const float* v = values.data();
  auto bad = [v](size_t i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    return static_cast<uint32_t>((bits & kExponent) == kExponent);
  };
  const int64_t blocks = static_cast<int64_t>(values.size() / 8);
  uint32_t any = 0;
#pragma omp parallel for schedule(static) reduction(| : any) if (blocks >= int64_t{1} << 17)
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t block = 0;
    for (size_t j = 0; j < 8; ++j) block |= bad(static_cast<size_t>(b) * 8 + j);
    any |= block;
  }
  for (size_t i = static_cast<size_t>(blocks) * 8; i < values.size(); ++i) any |= bad(i);
  return any == 0;
}

std::string FirstNonFiniteIn(const ParamArena::Block& block, std::span<const float> buffer) {
  for (int64_t i = 0; i < block.size; ++i)
    if (!std::isfinite(buffer[static_cast<size_t>(block.offset + i)]))
      return block.name + "[" + std::to_string(i) + "]";
  return "";
}

std::string FirstNonFinite(const ParamArena& arena, std::span<const float> buffer) {
  for (const ParamArena::Block& b : arena.blocks())
    if (std::string at = FirstNonFiniteIn(b, buffer); !at.empty()) return at;
  return "";
}

}  // namespace reel::core
