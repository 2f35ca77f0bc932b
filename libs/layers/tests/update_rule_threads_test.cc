// The update rules of reel/update_rule.h split a large arena over the OpenMP threads when they are
// compiled with OpenMP (this library and the core are). Split or not, every parameter must get
// exactly the update it gets on one thread: no block skipped, none applied twice, the tail
// (fewer than a block) included; and the gradient's sum of squares taken in the same pass is the
// same to the last bit, and finds a NaN or infinity in whichever thread's chunks it lies.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "reel/update_rule.h"

namespace reel {
namespace {

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 1000) / 1000.0f;
  return v;
}

// Three updates with `threads` OpenMP threads, by Apply() or, `summing`, by ApplySummingSquares():
// the parameters after them and each step's sum of squares (none for Apply()).
std::pair<std::vector<float>, std::vector<double>> ThreeUpdates(const std::string& rule, size_t n,
                                                                int threads, bool summing) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  UpdateRuleConfig config;
  config.rule = rule;
  auto update = MakeUpdateRule(config);
  EXPECT_TRUE(update.ok()) << update.status().ToString();
  std::vector<float> params = Ramp(n, 1.0f);
  const std::vector<float> grads = Ramp(n, -0.5f);
  std::vector<double> sums;
  for (int step = 0; step < 3; ++step) {
    if (summing)
      sums.push_back((*update)->ApplySummingSquares(params, grads, 0.01f));
    else
      (*update)->Apply(params, grads, 0.01f);
  }
  omp_set_num_threads(saved);
  return {params, sums};
}
std::vector<float> Updated(const std::string& rule, size_t n, int threads) {
  return ThreeUpdates(rule, n, threads, false).first;
}
std::pair<std::vector<float>, std::vector<double>> UpdatedSumming(const std::string& rule, size_t n,
                                                                  int threads) {
  return ThreeUpdates(rule, n, threads, true);
}

TEST(UpdateRuleThreads, ALargeArenaSplitOverThreadsGetsTheOneThreadUpdate) {
  // Over the split threshold, with a tail of 37 floats after the last whole block.
  const size_t n = UpdateRule::kSplitMin + 64 * 3 + 37;
  for (const std::string rule : {"sgd", "momentum", "adagrad", "adam"}) {
    const std::vector<float> one = Updated(rule, n, 1);
    const std::vector<float> two = Updated(rule, n, 2);
    const std::vector<float> start = Ramp(n, 1.0f);
    size_t differ = 0, unchanged = 0;
    for (size_t i = 0; i < n; ++i) {
      differ += one[i] != two[i];
      unchanged += two[i] == start[i] && one[i] != start[i];
    }
    EXPECT_EQ(differ, 0u) << rule;
    EXPECT_EQ(unchanged, 0u) << rule << ": parameters the split left out";
  }
}

TEST(UpdateRuleThreads, TheFusedSumOfSquaresIsTheSameOnAnyThreadCount) {
  const size_t n = UpdateRule::kSplitMin + 64 * 3 + 37;
  const std::vector<float> grads = Ramp(n, -0.5f);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one_thread = SumOfSquares(grads);
  omp_set_num_threads(2);
  EXPECT_EQ(SumOfSquares(grads), one_thread);  // bit for bit
  omp_set_num_threads(saved);
  for (const std::string rule : {"sgd", "momentum", "adagrad", "adam"}) {
    const auto [p1, s1] = UpdatedSumming(rule, n, 1);
    const auto [p2, s2] = UpdatedSumming(rule, n, 2);
    EXPECT_EQ(p1, p2) << rule;
    EXPECT_EQ(p1, Updated(rule, n, 1)) << rule << ": not what Apply() leaves";
    EXPECT_EQ(s1, s2) << rule;
    EXPECT_EQ(s1, std::vector<double>(3, one_thread)) << rule;
  }
}

// Two threads take the 64K-float chunks as they finish, so no element belongs to one thread for
// sure: a NaN, +inf and -inf at the first and the last element of every chunk (each thread's
// range, whichever it is) and in the tail after the last whole block all make the sum
// non-finite.
TEST(UpdateRuleThreads, TheSumOfSquaresFindsANonFiniteGradientInEveryChunk) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  constexpr size_t kChunk = 65536;
  const size_t n = 2 * UpdateRule::kSplitMin + 64 * 3 + 37;
  std::vector<float> grads = Ramp(n, -0.5f);
  ASSERT_TRUE(std::isfinite(SumOfSquares(grads)));
  std::vector<size_t> at = {n - 1, n - 20};  // the tail: after the last whole 64-float block
  for (size_t c = 0; c * kChunk < n; ++c) {
    at.push_back(c * kChunk);
    at.push_back(std::min(n, (c + 1) * kChunk) - 1);
  }
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()})
    for (size_t i : at) {
      const float kept = grads[i];
      grads[i] = bad;
      EXPECT_FALSE(std::isfinite(SumOfSquares(grads))) << bad << " at " << i;
      grads[i] = kept;
    }
  // And through a rule's fused pass, once in a middle chunk.
  UpdateRuleConfig config;
  auto adam = MakeUpdateRule(config);
  ASSERT_TRUE(adam.ok());
  std::vector<float> params = Ramp(n, 1.0f);
  grads[n / 2] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(std::isfinite((*adam)->ApplySummingSquares(params, grads, 0.01f)));
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace reel
