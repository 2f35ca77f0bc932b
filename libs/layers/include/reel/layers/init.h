// Deterministic parameter initialisation: every block's values depend only on (seed, block name),
// never on declaration order, thread count or the standard library's distributions, so a model
// initialised with the same seed is bit-identical on every machine and rank.
//
// Thread-safety: pure functions; Rng is a value with no shared state.
#ifndef REEL_LAYERS_INIT_H_
#define REEL_LAYERS_INIT_H_

#include <cstdint>
#include <span>
#include <string_view>

namespace reel::layers {

// SplitMix64: tiny, fast, and fully specified (unlike std::uniform_real_distribution).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [-bound, bound).
  float Symmetric(float bound) { return (2.0f * Uniform() - 1.0f) * bound; }

 private:
  uint64_t state_;
};

// FNV-1a of `name` mixed with `seed`: the stream for one named block.
uint64_t BlockSeed(uint64_t seed, std::string_view name);

// Fills `values` uniformly in [-bound, bound) from the stream of (seed, name).
void FillUniform(std::span<float> values, float bound, uint64_t seed, std::string_view name);

}  // namespace reel::layers

#endif  // REEL_LAYERS_INIT_H_
