// The sync optimizer's `compression` and `error_feedback` options (docs/distributed.md,
// "Compression on the wire"): bad words refused naming the option and the allowed values, ranks
// that disagree refused, 2-rank training with every setting and exchange path lowering the loss
// with every rank's parameters equal, and error feedback keeping the running sum of the
// exchanged gradients on the true one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <thread>

#include "optim/sync_optimizer.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/trainer.h"
#include "reel/testing/transport_conformance.h"
#include "train/testing.h"
#include "train/tiny_run.h"

namespace reel::core {
namespace {

using conformance::Communicators;
using conformance::RunOnRanks;
using ::testing::HasSubstr;

Result<std::unique_ptr<Optimizer>> MakeCompressedSync(
    const std::map<std::string, std::string>& given) {
  REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(SyncOptimizerOptions(), given));
  return MakeSyncOptimizer(o);
}

TEST(SyncCompression, BadWordsAreRefusedNamingTheOptionAndTheAllowedValues) {
  for (const char* word : {"fp8", "BF16", "", "int8"}) {
    auto bad = MakeCompressedSync({{"compression", word}});
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << word;
    EXPECT_THAT(bad.status().message(), HasSubstr("option 'compression'"));
    EXPECT_THAT(bad.status().message(), HasSubstr("none, bf16, fp16"));
  }
  auto bad = ParseOptions(SyncOptimizerOptions(), {{"error_feedback", "maybe"}});
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("error_feedback"));
  for (const char* word : {"none", "bf16", "fp16"})
    EXPECT_TRUE(MakeCompressedSync({{"compression", word}, {"error_feedback", "true"}}).ok());
}

TEST(SyncCompression, RanksWithDifferentCompressionAreRefused) {
  Communicators comms = testing::InprocRingGroup(2);
  ParamArena arenas[2];
  for (ParamArena& a : arenas) {
    ASSERT_TRUE(a.Declare("w", {40}).ok());
    a.Finalize();
  }
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    REEL_ASSIGN_OR_RETURN(auto opt,
                          MakeCompressedSync({{"compression", c.rank() == 0 ? "bf16" : "none"}}));
    return opt->Setup(arenas[c.rank()], c);
  });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("same compression"));
  }
}

// 2 ranks train the tiny model with `sync` under `options`; returns rank 0's last logged loss
// (the mean of the last 5 steps) and checks every rank ends with the same parameters.
double TrainTwoRanks(const std::map<std::string, std::string>& options, double lr) {
  testing::MemStorage storage;
  testing::TinyGroup group(2);
  TrainerOptions o = testing::TinyTrainerOptions();
  o.steps = 30;
  o.log_every_steps = 5;
  o.learning_rate = {.base = lr};
  o.verbosity = 0;
  std::vector<std::unique_ptr<Optimizer>> opts;
  for (int i = 0; i < 2; ++i) {
    auto opt = MakeCompressedSync(options);
    EXPECT_TRUE(opt.ok()) << opt.status();
    if (!opt.ok()) return NAN;
    opts.push_back(std::move(*opt));
  }
  std::vector<Result<TrainResult>> results(2, Result<TrainResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      RankComponents parts = group.ranks[i]->components(group.comms[i].get(), false);
      parts.optimizer = opts[i].get();
      results[i] = RunTrainer(o, parts, storage);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(results[i].ok()) << "rank " << i << ": " << results[i].status();
    if (!results[i].ok()) return NAN;
  }
  EXPECT_EQ(group.ranks[0]->params(), group.ranks[1]->params());
  return results[0]->last_loss;
}

TEST(SyncCompression, TwoRanksTrainWithEverySettingAndStayIdentical) {
  const double untrained = TrainTwoRanks({}, 1e-9);
  const double plain = TrainTwoRanks({{"rule", "adam"}}, 0.05);
  ASSERT_LT(plain, untrained);
  for (const char* compression : {"bf16", "fp16"})
    for (const char* feedback : {"false", "true"})
      for (const auto& path : std::vector<std::map<std::string, std::string>>{
               {{"bucket_mb", "0"}},       // after backward
               {{"bucket_mb", "0.0001"}},  // a bucket per block
               {{"zero_stage", "1"}}}) {   // the reduce-scatter compressed
        std::map<std::string, std::string> options = path;
        options["rule"] = "adam";
        options["compression"] = compression;
        options["error_feedback"] = feedback;
        SCOPED_TRACE(std::string(compression) + " error_feedback " + feedback + " " +
                     path.begin()->first + " " + path.begin()->second);
        const double loss = TrainTwoRanks(options, 0.05);
        EXPECT_LT(loss, untrained);
        EXPECT_NEAR(loss, plain, 0.2 * (untrained - plain));
      }
}

// SGD without momentum moves the parameters by -lr times each step's exchanged mean: their drift
// from the true means' running sum is the exchange's accumulated error. Gradients that the wire
// rounds the same way every step (a constant per element, a little noise) make that error grow
// with the steps without error feedback; with it, it stays at what the residuals hold.
TEST(SyncCompression, ErrorFeedbackKeepsTheRunningSumOnTheTrueOne) {
  constexpr int kRanks = 3, kSteps = 200;
  constexpr size_t kFloats = 300;
  auto grad = [](int rank, int step, size_t i) {
    return 0.1f * (1.0f + 0.0137f * static_cast<float>(i) + 0.31f * static_cast<float>(rank)) +
           1e-5f * static_cast<float>(std::sin(0.7 * step + 1.3 * static_cast<double>(i)));
  };
  std::vector<double> truth(kFloats, 0.0);
  for (int step = 0; step < kSteps; ++step)
    for (size_t i = 0; i < kFloats; ++i) {
      double sum = 0;
      for (int r = 0; r < kRanks; ++r) sum += grad(r, step, i);
      truth[i] -= sum / kRanks;
    }
  for (const char* compression : {"bf16", "fp16"}) {
    double drift[2] = {0, 0};
    for (int feedback = 0; feedback < 2; ++feedback) {
      Communicators comms = testing::InprocRingGroup(kRanks);
      std::vector<ParamArena> arenas(kRanks);
      for (ParamArena& a : arenas) {
        ASSERT_TRUE(a.Declare("w", {static_cast<int64_t>(kFloats)}).ok());
        a.Finalize();
        for (float& v : a.values()) v = 0.0f;
      }
      std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
        ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
        REEL_ASSIGN_OR_RETURN(
            auto opt, MakeCompressedSync({{"rule", "sgd"},
                                          {"bucket_mb", "0"},
                                          {"compression", compression},
                                          {"error_feedback", feedback ? "true" : "false"}}));
        REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
        for (int step = 0; step < kSteps; ++step) {
          for (size_t i = 0; i < kFloats; ++i) arena.grads()[i] = grad(c.rank(), step, i);
          REEL_RETURN_IF_ERROR(opt->Step(1.0f));
        }
        return opt->Finish();
      });
      for (const Status& s : st) ASSERT_TRUE(s.ok()) << s;
      for (size_t i = 0; i < kFloats; ++i)
        drift[feedback] = std::max(drift[feedback], std::fabs(arenas[0].values()[i] - truth[i]));
    }
    SCOPED_TRACE(compression);
    // The sum reaches about 30; fp32's own rounding of it is below 1e-5 a step.
    EXPECT_GT(drift[0], 20 * drift[1]) << "without " << drift[0] << ", with " << drift[1];
  }
}

}  // namespace
}  // namespace reel::core
