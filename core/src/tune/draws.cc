#include "draws.h"

#include <cmath>

namespace reel::core::tune {

uint64_t UniformIndex(std::mt19937_64& gen, uint64_t n) {
  // 2^64 mod n, computed in 64 bits: draws below it would make the low residues likelier.
  const uint64_t reject_below = (0 - n) % n;
  uint64_t x = gen();
  while (x < reject_below) x = gen();
  return x % n;
}

double UniformUnit(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }

double UniformReal(std::mt19937_64& gen, double lo, double hi) {
  return lo + UniformUnit(gen) * (hi - lo);
}

double LogUniform(std::mt19937_64& gen, double lo, double hi) {
  return std::exp(UniformReal(gen, std::log(lo), std::log(hi)));
}

int64_t UniformInt(std::mt19937_64& gen, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == UINT64_MAX) return static_cast<int64_t>(gen());
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + UniformIndex(gen, span + 1));
}

}  // namespace reel::core::tune
