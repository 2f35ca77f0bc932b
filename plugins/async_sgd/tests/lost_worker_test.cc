// A worker lost mid-run, under the trainer, ranks as threads: the lead counts the share it did
// not train from what the servers applied of its pushes, not from its last report. Counted
// exactly: the lost worker's data source fails after a known number of batches of a known size,
// long after its last report (its start), and its rank then goes away as a dead process's would.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ranks.h"

namespace reel::async_sgd::lost_worker_test {
namespace {

using core::testing::TinySource;

// Servers 0 and 1, workers 2 (the lead) and 3; worker 3 trains kLostAfter steps of its budget.
constexpr int kWorld = 4, kServers = 2, kLost = 3, kSteps = 30, kLostAfter = 7;
constexpr int kBatch = 4, kDim = 6, kClasses = 12;

// push_every 1 and 2: with 2, the lost worker's 7th step was computed but never pushed, so it
// does not count as trained.
class LostWorker : public ::testing::TestWithParam<int> {};

TEST_P(LostWorker, ItsShareIsCountedFromWhatTheServersApplied) {
  const int push_every = GetParam();
  core::testing::MemStorage storage;
  std::vector<Result<core::TrainResult>> results =
      OnRankThreads(kWorld, [&](int r, auto& comm) -> Result<core::TrainResult> {
        Result<core::TrainResult> result = [&]() -> Result<core::TrainResult> {
          REEL_ASSIGN_OR_RETURN(
              Options o, ParseOptions(AsyncOptions(), {{"servers", std::to_string(kServers)},
                                                       {"rule", "sgd"},
                                                       {"push_every", std::to_string(push_every)},
                                                       {"timeout_ms", "60000"}}));
          REEL_ASSIGN_OR_RETURN(auto opt, AsyncOptimizer::Create(o, {r, kWorld}));
          const bool serves = opt->IsServerOnly();
          REEL_ASSIGN_OR_RETURN(
              auto group, comm->Split(serves ? 1 : 0, r, DeadlineIn(std::chrono::minutes(1))));
          const ShardSpec shard{serves ? 0 : r - kServers, kWorld - kServers};
          TinySource healthy(96, kDim, kClasses, kBatch, 7, shard);
          FailingSource failing(TinySource(96, kDim, kClasses, kBatch, 7, shard), kLostAfter,
                                "the lost worker's disk went away");
          DataSource* train = serves       ? nullptr
                              : r == kLost ? static_cast<DataSource*>(&failing)
                                           : &healthy;
          return TrainTinyRank(*opt, *comm, *group, train, kSteps, kDim, kClasses, storage);
        }();
        // The lost worker's rank goes away, as its process would when it dies.
        if (r == kLost) comm.reset();
        return result;
      });
  EXPECT_EQ(results[kLost].status().code(), StatusCode::kDataLoss) << results[kLost].status();
  for (int r : {0, 1, 2})
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
  const core::TrainResult& lead = *results[kServers];
  EXPECT_EQ(lead.steps, kSteps);
  ASSERT_EQ(lead.lost_ranks.size(), 1u);
  const core::LostRank& l = lead.lost_ranks[0];
  EXPECT_EQ(l.rank, kLost);
  // Its last report was its start; what reached both servers is every whole push.
  const int pushed_steps = kLostAfter / push_every * push_every;
  EXPECT_EQ(l.last_step, 0);
  EXPECT_EQ(l.applied_step, pushed_steps);
  EXPECT_EQ(l.applied_updates, kLostAfter / push_every);
  EXPECT_EQ(l.steps_not_trained, kSteps - pushed_steps);
  EXPECT_EQ(l.examples_not_trained, (kSteps - pushed_steps) * kBatch);
}

INSTANTIATE_TEST_SUITE_P(PushEvery, LostWorker, ::testing::Values(1, 2));

// `inner`'s batches with a NaN in the first value of the one after `clean` batches.
class NanAfterBatches : public DataSource {
 public:
  NanAfterBatches(TinySource inner, int clean) : inner_(std::move(inner)), clean_(clean) {}
  Result<Batch> Next() override {
    Result<Batch> b = inner_.Next();
    if (b.ok() && taken_++ == clean_) b->features.at("x").values.data()[0] = std::nanf("");
    return b;
  }
  Status StartEpoch(int64_t epoch) override { return inner_.StartEpoch(epoch); }
  Result<std::string> Position() const override { return inner_.Position(); }
  Status Restore(std::string_view p) override { return inner_.Restore(p); }

 private:
  TinySource inner_;
  const int clean_;
  int taken_ = 0;
};

// trainer.stop_on_nonfinite on an async_sgd worker: its NaN loss at step kLostAfter + 1 ends its
// run with the error naming that step before anything of it is pushed (the servers applied
// exactly its first kLostAfter steps), and the others finish without it, as without a lost one.
TEST(NonFiniteWorker, RefusesToPushAndItsRunEndsWithTheError) {
  core::testing::MemStorage storage;
  std::vector<Result<core::TrainResult>> results =
      OnRankThreads(kWorld, [&](int r, auto& comm) -> Result<core::TrainResult> {
        Result<core::TrainResult> result = [&]() -> Result<core::TrainResult> {
          REEL_ASSIGN_OR_RETURN(Options o,
                                ParseOptions(AsyncOptions(), {{"servers", std::to_string(kServers)},
                                                              {"rule", "sgd"},
                                                              {"timeout_ms", "60000"}}));
          REEL_ASSIGN_OR_RETURN(auto opt, AsyncOptimizer::Create(o, {r, kWorld}));
          const bool serves = opt->IsServerOnly();
          REEL_ASSIGN_OR_RETURN(
              auto group, comm->Split(serves ? 1 : 0, r, DeadlineIn(std::chrono::minutes(1))));
          const ShardSpec shard{serves ? 0 : r - kServers, kWorld - kServers};
          TinySource healthy(96, kDim, kClasses, kBatch, 7, shard);
          NanAfterBatches nan(TinySource(96, kDim, kClasses, kBatch, 7, shard), kLostAfter);
          DataSource* train = serves       ? nullptr
                              : r == kLost ? static_cast<DataSource*>(&nan)
                                           : &healthy;
          return TrainTinyRank(*opt, *comm, *group, train, kSteps, kDim, kClasses, storage);
        }();
        if (r == kLost) comm.reset();  // its process exits with the error
        return result;
      });
  ASSERT_FALSE(results[kLost].ok());
  EXPECT_EQ(results[kLost].status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(results[kLost].status().message(),
              ::testing::HasSubstr("training stopped at step " + std::to_string(kLostAfter + 1) +
                                   ": the loss is"));
  for (int r : {0, 1, 2})
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
  const core::TrainResult& lead = *results[kServers];
  ASSERT_EQ(lead.lost_ranks.size(), 1u);
  EXPECT_EQ(lead.lost_ranks[0].applied_step, kLostAfter);
  EXPECT_TRUE(std::isfinite(lead.last_loss));
}

}  // namespace
}  // namespace reel::async_sgd::lost_worker_test
