#include "reel/layers/init.h"

namespace reel::layers {

uint64_t BlockSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  // One SplitMix step decorrelates nearby seeds.
  Rng mix(h ^ (seed * 0x9E3779B97F4A7C15ull));
  return mix.Next();
}

void FillUniform(std::span<float> values, float bound, uint64_t seed, std::string_view name) {
  Rng rng(BlockSeed(seed, name));
  for (float& v : values) v = rng.Symmetric(bound);
}

}  // namespace reel::layers
