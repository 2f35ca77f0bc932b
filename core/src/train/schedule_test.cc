#include "reel/core/schedule.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "reel/update_rule.h"

namespace reel::core {
namespace {

TEST(ScheduleTest, Constant) {
  auto s = LrSchedule::Create({.base = 0.01});
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->At(0), 0.01);
  EXPECT_DOUBLE_EQ(s->At(12345), 0.01);
}

TEST(ScheduleTest, StaircaseExponential) {
  auto s = LrSchedule::Create(
      {.base = 0.1, .schedule = "exponential", .decay_steps = 10, .decay_rate = 0.5});
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->At(0), 0.1);
  EXPECT_DOUBLE_EQ(s->At(9), 0.1);
  EXPECT_DOUBLE_EQ(s->At(10), 0.05);
  EXPECT_DOUBLE_EQ(s->At(25), 0.025);
}

TEST(ScheduleTest, CosineWithWarmup) {
  auto s = LrSchedule::Create(
      {.base = 1.0, .schedule = "cosine", .min_lr = 0.0, .warmup_steps = 4, .total_steps = 14});
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->At(0), 0.25);
  EXPECT_DOUBLE_EQ(s->At(3), 1.0);
  EXPECT_DOUBLE_EQ(s->At(4), 1.0);
  EXPECT_NEAR(s->At(9), 0.5, 1e-12);  // halfway through the 10 decay steps
  EXPECT_NEAR(s->At(14), 0.0, 1e-12);
  EXPECT_NEAR(s->At(100), 0.0, 1e-12);  // clamps past the end
}

// Without a step budget cosine anneals once per epoch, as CosineAnnealingLR(T_max=3) stepped
// after every epoch; warmup still counts steps.
TEST(ScheduleTest, CosineOverAnEpochBudget) {
  auto s = LrSchedule::Create(
      {.base = 1.0, .schedule = "cosine", .min_lr = 0.2, .warmup_steps = 2, .total_epochs = 3});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(s->At(0, 0), 0.5);  // warmup
  EXPECT_DOUBLE_EQ(s->At(5, 0), 1.0);
  EXPECT_NEAR(s->At(6, 1), 0.2 + 0.8 * 0.75, 1e-12);
  EXPECT_NEAR(s->At(12, 2), 0.2 + 0.8 * 0.25, 1e-12);
  EXPECT_NEAR(s->At(18, 3), 0.2, 1e-12);
}

TEST(ScheduleTest, BadConfigsNameTheField) {
  auto unknown = LrSchedule::Create({.base = 0.1, .schedule = "linear"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'linear'"), std::string::npos);
  auto no_decay = LrSchedule::Create({.base = 0.1, .schedule = "exponential"});
  ASSERT_FALSE(no_decay.ok());
  EXPECT_NE(no_decay.status().message().find("decay_steps"), std::string::npos);
  EXPECT_FALSE(LrSchedule::Create({.base = 0.0}).ok());
  auto no_budget = LrSchedule::Create({.base = 0.1, .schedule = "cosine"});
  ASSERT_FALSE(no_budget.ok());
  EXPECT_NE(no_budget.status().message().find("trainer.epochs"), std::string::npos);
}

TEST(ClipTest, ScalesToMaxNorm) {
  std::vector<float> g{3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(ClipByGlobalNorm(g, 1.0), 5.0);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.8f);
}

TEST(ClipTest, LeavesSmallGradientsAndDisabled) {
  std::vector<float> g{0.3f, 0.4f};
  EXPECT_NEAR(ClipByGlobalNorm(g, 1.0), 0.5, 1e-7);
  EXPECT_FLOAT_EQ(g[0], 0.3f);
  std::vector<float> big{30.0f, 40.0f};
  ClipByGlobalNorm(big, 0.0);
  EXPECT_FLOAT_EQ(big[1], 40.0f);
}

// The norm of a gradient large enough to be split over the threads is the one the update rules
// sum (SumOfSquares), the same on 1 and 2 threads, and so is the clipped gradient, bit for bit.
TEST(ClipTest, ALargeGradientClipsAlikeOnAnyThreadCount) {
#if defined(REEL_TEST_UNDER_TSAN)
  GTEST_SKIP() << "libgomp's barriers are invisible to ThreadSanitizer (core/CMakeLists.txt)";
#endif
  const size_t n = (size_t{1} << 20) + 64 * 3 + 37;
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  const int saved = omp_get_max_threads();
  std::vector<std::vector<float>> clipped;
  std::vector<double> norms;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    clipped.push_back(g);
    norms.push_back(ClipByGlobalNorm(clipped.back(), 1.0));
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(norms[0], std::sqrt(SumOfSquares(g)));
  EXPECT_EQ(norms[1], norms[0]);
  EXPECT_EQ(clipped[1], clipped[0]);
  EXPECT_NEAR(clipped[0][n - 1], g[n - 1] / norms[0], 1e-9);  // the tail was scaled
}

}  // namespace
}  // namespace reel::core
