// Seeded random draws that are the same on every standard library, so a search's seed names the
// same trials wherever reel is built. std::mt19937_64's output is fixed by the C++ standard
// ([rand.predef]: its 10000th output is 9981545732273789042), but the results of
// std::uniform_int_distribution, std::uniform_real_distribution and std::shuffle are left to each
// library (libstdc++ and libc++ differ). These draws use only the engine's output.
//
// Thread-safety: functions of the generator passed in; one generator per thread.
#ifndef REEL_CORE_SRC_TUNE_DRAWS_H_
#define REEL_CORE_SRC_TUNE_DRAWS_H_

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace reel::core::tune {

// Uniform on [0, n) without bias: draws below 2^64 mod n are rejected (as Lemire, "Fast random
// integer generation in an interval", ACM TOMACS 2019, section 3). REQUIRES: n >= 1.
uint64_t UniformIndex(std::mt19937_64& gen, uint64_t n);

// Uniform on [0, 1): the top 53 bits of one draw, times 2^-53 (every double of the form k/2^53).
double UniformUnit(std::mt19937_64& gen);

// Uniform on [lo, hi]; log-uniform on [lo, hi] (exp of a uniform on [log lo, log hi]).
// REQUIRES: lo <= hi; for LogUniform, lo > 0.
double UniformReal(std::mt19937_64& gen, double lo, double hi);
double LogUniform(std::mt19937_64& gen, double lo, double hi);

// Uniform over the whole numbers of [lo, hi]. REQUIRES: lo <= hi.
int64_t UniformInt(std::mt19937_64& gen, int64_t lo, int64_t hi);

// Fisher-Yates (Knuth, TAOCP vol. 2, 3.4.2, Algorithm P): position i, from the last down to 1,
// swaps with a uniform position in [0, i].
template <typename T>
void Shuffle(std::vector<T>& v, std::mt19937_64& gen) {
  for (size_t i = v.size(); i > 1; --i) {
    const auto j = static_cast<size_t>(UniformIndex(gen, i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace reel::core::tune

#endif  // REEL_CORE_SRC_TUNE_DRAWS_H_
