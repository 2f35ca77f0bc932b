// The "sync" optimizer: N ranks with different gradients end with identical parameters, equal to
// one rank stepping on the averaged gradient.
#include "optim/sync_optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/registry.h"
#include "reel/core/schedule.h"
#include "reel/testing/transport_conformance.h"
#include "reel/update_rule.h"
#include "train/tiny_run.h"

namespace reel::core {
namespace {

using conformance::Communicators;
using conformance::RunOnRanks;
using ::testing::HasSubstr;

constexpr int kSteps = 4;

Result<std::unique_ptr<Optimizer>> MakeSync(const std::map<std::string, std::string>& given) {
  REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(SyncOptimizerOptions(), given));
  return MakeSyncOptimizer(o);
}

// Two blocks, so the fused message spans padding between them.
void Declare(ParamArena& arena, int64_t extra = 0) {
  ASSERT_TRUE(arena.Declare("w", {3, 5}).ok());
  ASSERT_TRUE(arena.Declare("b", {7 + extra}).ok());
  arena.Finalize();
}

float RankGrad(int rank, int step, size_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.1 * rank + 0.5 * step));
}

class SyncOptimizerTest : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(SyncOptimizerTest, RanksEndIdenticalAndEqualToAveragedSingleRankSteps) {
  const auto& [n, rule] = GetParam();
  const std::map<std::string, std::string> options = {{"rule", rule}};
  Communicators comms = testing::InprocRingGroup(n);
  std::vector<ParamArena> arenas(static_cast<size_t>(n));
  for (auto& a : arenas) Declare(a);
  const size_t total = static_cast<size_t>(arenas[0].total_size());
  // Different initial values per rank: Setup must replace them with rank 0's.
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < total; ++i)
      arenas[r].values()[i] = static_cast<float>(r * 100 + i) * 0.01f;
  std::vector<float> initial0(arenas[0].values().begin(), arenas[0].values().end());

  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    REEL_ASSIGN_OR_RETURN(auto opt, MakeSync(options));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    for (int step = 1; step <= kSteps; ++step) {
      for (size_t i = 0; i < total; ++i) arena.grads()[i] = RankGrad(c.rank(), step, i);
      REEL_RETURN_IF_ERROR(opt->Step(0.1f));
    }
    return opt->Finish();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];

  // The reference: one rule, rank 0's initial values, the mean gradient computed here.
  auto ref_rule = MakeUpdateRule(UpdateRuleConfigFrom(*ParseOptions(UpdateRuleOptions(), options)));
  ASSERT_TRUE(ref_rule.ok());
  std::vector<float> want = initial0, mean(total);
  for (int step = 1; step <= kSteps; ++step) {
    for (size_t i = 0; i < total; ++i) {
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += RankGrad(r, step, i);
      mean[i] = static_cast<float>(sum / n);
    }
    (*ref_rule)->Apply(want, mean, 0.1f);
  }
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < total; ++i) {
      EXPECT_EQ(arenas[r].values()[i], arenas[0].values()[i])
          << "rank " << r << " differs at " << i;
      EXPECT_NEAR(arenas[r].values()[i], want[i], 1e-4) << "rank " << r << " index " << i;
    }
  }
  EXPECT_NE(want[0], initial0[0]);  // the steps moved the parameters
}

INSTANTIATE_TEST_SUITE_P(Ranks, SyncOptimizerTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values("sgd", "adam")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" +
                                  std::get<1>(info.param);
                         });

// The trainer hands clipping to "sync", which clips the averaged gradient: the same on every
// rank, and the clipped gradient of the whole batch, which averaging ranks' clipped gradients is
// not.
TEST(SyncOptimizer, ClipsTheAveragedGradientNotEachRanksOwn) {
  constexpr int n = 3;
  constexpr double kClip = 0.5;
  Communicators comms = testing::InprocRingGroup(n);
  std::vector<ParamArena> arenas(n);
  for (auto& a : arenas) Declare(a);
  const size_t total = static_cast<size_t>(arenas[0].total_size());
  std::vector<double> norms(n);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    REEL_ASSIGN_OR_RETURN(auto opt, MakeSync({{"rule", "sgd"}}));
    if (!opt->AcceptGradientClipping(kClip)) return InternalError("sync declined clipping");
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    for (size_t i = 0; i < total; ++i) arena.grads()[i] = RankGrad(c.rank(), 1, i);
    REEL_RETURN_IF_ERROR(opt->Step(1.0f));
    norms[static_cast<size_t>(c.rank())] = opt->last_gradient_norm();
    return opt->Finish();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];

  std::vector<float> mean(total), mean_of_clipped(total, 0.0f);
  for (size_t i = 0; i < total; ++i) {
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += RankGrad(r, 1, i);
    mean[i] = static_cast<float>(sum / n);
  }
  for (int r = 0; r < n; ++r) {
    std::vector<float> own(total);
    for (size_t i = 0; i < total; ++i) own[i] = RankGrad(r, 1, i);
    ASSERT_GT(ClipByGlobalNorm(own, kClip), kClip);  // every rank's own gradient is clipped too
    for (size_t i = 0; i < total; ++i) mean_of_clipped[i] += own[i] / n;
  }
  const double mean_norm = ClipByGlobalNorm(mean, kClip);
  ASSERT_GT(mean_norm, kClip);  // the clip binds on the average
  double apart = 0;
  for (size_t i = 0; i < total; ++i)
    apart = std::max(apart, static_cast<double>(std::abs(mean[i] - mean_of_clipped[i])));
  ASSERT_GT(apart, 1e-2);  // so this test tells the two orders apart
  for (int r = 0; r < n; ++r) {
    EXPECT_NEAR(norms[r], mean_norm, 1e-5) << "rank " << r;
    for (size_t i = 0; i < total; ++i)  // started at 0, one step with lr 1: values = -gradient
      EXPECT_NEAR(arenas[r].values()[i], -mean[i], 1e-5) << "rank " << r << " index " << i;
  }
}

TEST(SyncOptimizer, StateRoundTripContinuesIdentically) {
  Communicators comms = testing::InprocRingGroup(1);
  ParamArena a, b;
  Declare(a);
  Declare(b);
  auto opt_a = MakeSync({{"rule", "adam"}});
  auto opt_b = MakeSync({{"rule", "adam"}});
  ASSERT_TRUE(opt_a.ok() && opt_b.ok());
  ASSERT_TRUE((*opt_a)->Setup(a, *comms[0]).ok());
  ASSERT_TRUE((*opt_b)->Setup(b, *comms[0]).ok());
  auto fill = [](ParamArena& arena, int step) {
    for (size_t i = 0; i < arena.grads().size(); ++i) arena.grads()[i] = RankGrad(0, step, i);
  };
  for (int s = 1; s <= 2; ++s) {
    fill(a, s);
    ASSERT_TRUE((*opt_a)->Step(0.1f).ok());
  }
  auto state = (*opt_a)->SaveState();
  ASSERT_TRUE(state.ok());
  ASSERT_TRUE((*opt_b)->RestoreState(*state).ok());
  std::copy(a.values().begin(), a.values().end(), b.values().begin());
  for (int s = 3; s <= 4; ++s) {
    fill(a, s);
    fill(b, s);
    ASSERT_TRUE((*opt_a)->Step(0.1f).ok());
    ASSERT_TRUE((*opt_b)->Step(0.1f).ok());
  }
  EXPECT_TRUE(std::equal(a.values().begin(), a.values().end(), b.values().begin()));
}

// Without a clip the rule sums the gradient's norm in its own pass
// (UpdateRule::ApplySummingSquares); with one that does not bind, ClipByGlobalNorm sums it first.
// Both paths report the same norm and leave the same parameters, bit for bit, for every rule,
// over several 64K-float chunks and a tail (below UpdateRule::kSplitMin, so one thread: the
// threads' part is libs/layers/tests/update_rule_threads_test.cc's).
TEST(SyncOptimizer, TheNormIsTheSameWithAClipThatDoesNotBindAndWithout) {
  Communicators comms = testing::InprocRingGroup(1);
  for (const std::string rule : {"sgd", "momentum", "adagrad", "adam"}) {
    ParamArena fused, clipped;
    for (ParamArena* arena : {&fused, &clipped}) {
      ASSERT_TRUE(arena->Declare("w", {300, 1000}).ok());
      ASSERT_TRUE(arena->Declare("b", {37}).ok());
      arena->Finalize();
    }
    auto opt_fused = MakeSync({{"rule", rule}});
    auto opt_clipped = MakeSync({{"rule", rule}});
    ASSERT_TRUE(opt_fused.ok() && opt_clipped.ok());
    ASSERT_TRUE((*opt_clipped)->AcceptGradientClipping(1e30));
    ASSERT_TRUE((*opt_fused)->Setup(fused, *comms[0]).ok());
    ASSERT_TRUE((*opt_clipped)->Setup(clipped, *comms[0]).ok());
    for (int step = 1; step <= 2; ++step) {
      for (ParamArena* arena : {&fused, &clipped})
        for (size_t i = 0; i < arena->grads().size(); ++i) arena->grads()[i] = RankGrad(0, step, i);
      const double want = std::sqrt(SumOfSquares(fused.grads()));
      ASSERT_TRUE((*opt_fused)->Step(0.01f).ok());
      ASSERT_TRUE((*opt_clipped)->Step(0.01f).ok());
      EXPECT_EQ((*opt_fused)->last_gradient_norm(), want) << rule;  // bit for bit
      EXPECT_EQ((*opt_clipped)->last_gradient_norm(), want) << rule;
    }
    EXPECT_TRUE(std::equal(fused.values().begin(), fused.values().end(), clipped.values().begin()))
        << rule;
  }
}

TEST(SyncOptimizer, BadStateIsRefusedWithAReason) {
  Communicators comms = testing::InprocRingGroup(1);
  ParamArena arena, other;
  Declare(arena);
  Declare(other, /*extra=*/40);
  auto adam = MakeSync({{"rule", "adam"}});
  ASSERT_TRUE((*adam)->Setup(other, *comms[0]).ok());
  ASSERT_TRUE((*adam)->Step(0.1f).ok());
  const std::string good = *(*adam)->SaveState();

  auto fresh = MakeSync({{"rule", "adam"}});
  ASSERT_TRUE((*fresh)->Setup(arena, *comms[0]).ok());
  EXPECT_EQ((*fresh)->RestoreState("nonsense").code(), StatusCode::kDataLoss);
  EXPECT_EQ((*fresh)->RestoreState(good.substr(0, good.size() - 3)).code(), StatusCode::kDataLoss);
  Status wrong_model = (*fresh)->RestoreState(good);
  EXPECT_EQ(wrong_model.code(), StatusCode::kInvalidArgument) << wrong_model;
  EXPECT_THAT(wrong_model.message(), HasSubstr("moments for"));
  auto sgd = MakeSync({{"rule", "sgd"}});
  Status wrong_rule = (*sgd)->RestoreState(good);
  EXPECT_EQ(wrong_rule.code(), StatusCode::kInvalidArgument) << wrong_rule;
  EXPECT_THAT(wrong_rule.message(), HasSubstr("'adam'"));
}

TEST(SyncOptimizer, RanksWithDifferentModelsAreRefused) {
  Communicators comms = testing::InprocRingGroup(2);
  ParamArena a, b;
  Declare(a);
  Declare(b, /*extra=*/40);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    REEL_ASSIGN_OR_RETURN(auto opt, MakeSync({}));
    return opt->Setup(c.rank() == 0 ? a : b, c);
  });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("parameter floats"));
  }
}

TEST(SyncOptimizer, MisuseAndBadOptionsAreReported) {
  auto opt = MakeSync({});
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ((*opt)->Step(0.1f).code(), StatusCode::kFailedPrecondition);
  ParamArena unfinalized;
  Communicators comms = testing::InprocRingGroup(1);
  EXPECT_EQ((*opt)->Setup(unfinalized, *comms[0]).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(MakeSync({{"rule", "lbfgs"}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSync({{"timeout_ms", "-1"}}).status().code(), StatusCode::kInvalidArgument);
}

TEST(SyncOptimizer, RegisteredAsBuiltin) {
  Registry registry;
  ASSERT_TRUE(registry.RegisterBuiltins().ok());
  auto opt = registry.CreateOptimizer("sync", {{"rule", "momentum"}, {"nesterov", "true"}});
  ASSERT_TRUE(opt.ok()) << opt.status();
  auto bad = registry.CreateOptimizer("sync", {{"rule", "nope"}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("nope"));
}

}  // namespace
}  // namespace reel::core
