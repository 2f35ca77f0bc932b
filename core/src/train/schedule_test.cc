#include "reel/core/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

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

}  // namespace
}  // namespace reel::core
