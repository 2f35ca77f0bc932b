// The update rules of reel/update_rule.h split a large arena over the OpenMP threads when they are
// compiled with OpenMP (this library and the core are). Split or not, every parameter must get
// exactly the update it gets on one thread: no block skipped, none applied twice, the tail
// (fewer than a block) included.
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "reel/update_rule.h"

namespace reel {
namespace {

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 1000) / 1000.0f;
  return v;
}

// The parameters after three updates with `threads` OpenMP threads.
std::vector<float> Updated(const std::string& rule, size_t n, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  UpdateRuleConfig config;
  config.rule = rule;
  auto update = MakeUpdateRule(config);
  EXPECT_TRUE(update.ok()) << update.status().ToString();
  std::vector<float> params = Ramp(n, 1.0f);
  const std::vector<float> grads = Ramp(n, -0.5f);
  for (int step = 0; step < 3; ++step) (*update)->Apply(params, grads, 0.01f);
  omp_set_num_threads(saved);
  return params;
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

}  // namespace
}  // namespace reel
