// The lead worker lost, under the trainer, ranks as threads: the next worker takes over its
// duties (the servers name it), so the run ends with the evaluation, the checkpoint and the lead
// reported lost with the share it did not train, as when another worker dies. The lead goes away
// during training (its data fails after a known number of batches, before its first checkpoint
// step) or during its final evaluation (after it gathered the others' final reports).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ranks.h"
#include "reel/core/checkpoint.h"

namespace reel::async_sgd::lost_lead_test {
namespace {

using core::testing::TinySource;

// Server 0, workers 1 (the lead), 2 and 3.
constexpr int kWorld = 4, kServers = 1, kLead = 1, kNext = 2, kSteps = 30, kLostAfter = 7;
constexpr int kBatch = 4, kDim = 6, kClasses = 12, kCheckpointEvery = 10;

enum class When { kTraining, kFinalEvaluation };

class LostLead : public ::testing::TestWithParam<When> {};

TEST_P(LostLead, TheNextWorkerTakesOverAndEndsTheRun) {
  const When when = GetParam();
  core::testing::MemStorage storage;
  std::vector<Result<core::TrainResult>> results =
      OnRankThreads(kWorld, [&](int r, auto& comm) -> Result<core::TrainResult> {
        Result<core::TrainResult> result = [&]() -> Result<core::TrainResult> {
          REEL_ASSIGN_OR_RETURN(
              Options o, ParseOptions(AsyncOptions(), {{"rule", "sgd"}, {"timeout_ms", "60000"}}));
          REEL_ASSIGN_OR_RETURN(auto opt, AsyncOptimizer::Create(o, {r, kWorld}));
          const bool serves = opt->IsServerOnly();
          REEL_ASSIGN_OR_RETURN(
              auto group, comm->Split(serves ? 1 : 0, r, DeadlineIn(std::chrono::minutes(1))));
          const ShardSpec shard{serves ? 0 : r - kServers, kWorld - kServers};
          const bool lost_training = r == kLead && when == When::kTraining;
          const bool lost_evaluating = r == kLead && when == When::kFinalEvaluation;
          TinySource healthy(96, kDim, kClasses, kBatch, 7, shard);
          FailingSource failing(TinySource(96, kDim, kClasses, kBatch, 7, shard), kLostAfter,
                                "the lead's disk went away");
          TinySource eval(24, kDim, kClasses, kBatch, 3, {0, 1}, false);
          FailingSource failing_eval(TinySource(24, kDim, kClasses, kBatch, 3, {0, 1}, false), 0,
                                     "the lead's evaluation data went away");
          DataSource* train = serves          ? nullptr
                              : lost_training ? static_cast<DataSource*>(&failing)
                                              : &healthy;
          DataSource* evaluates = serves            ? nullptr
                                  : lost_evaluating ? static_cast<DataSource*>(&failing_eval)
                                                    : &eval;
          return TrainTinyRank(*opt, *comm, *group, train, kSteps, kDim, kClasses, storage,
                               evaluates, [](core::TrainerOptions& t) {
                                 t.checkpoint_dir = "mem://lead/ckpt";
                                 t.checkpoint_every_steps = kCheckpointEvery;
                                 t.timeout = std::chrono::seconds(60);
                               });
        }();
        // The lead's rank goes away, as its process would when it dies.
        if (r == kLead) comm.reset();
        return result;
      });
  EXPECT_EQ(results[kLead].status().code(), StatusCode::kDataLoss) << results[kLead].status();
  for (int r : {0, 2, 3})
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
  const core::TrainResult& next = *results[kNext];
  EXPECT_EQ(next.steps, kSteps);
  ASSERT_TRUE(next.final_eval.has_value());
  EXPECT_EQ(next.final_eval->videos, 24);
  ASSERT_FALSE(next.last_checkpoint.empty());
  ASSERT_EQ(next.lost_ranks.size(), 1u);
  const core::LostRank& l = next.lost_ranks[0];
  EXPECT_EQ(l.rank, kLead);
  EXPECT_EQ(l.group_rank, 0);
  // What reached the server of the lead's work: every step it took (one push a step).
  const int applied = when == When::kTraining ? kLostAfter : kSteps;
  EXPECT_EQ(l.applied_step, applied);
  EXPECT_EQ(l.applied_updates, applied);
  EXPECT_EQ(l.steps_not_trained, kSteps - applied);
  EXPECT_EQ(l.examples_not_trained, (kSteps - applied) * kBatch);
  // The other worker is no lead and lists nobody.
  EXPECT_TRUE(results[3]->lost_ranks.empty());
  EXPECT_FALSE(results[3]->final_eval.has_value());

  // The final checkpoint loads: every worker's position (the lost lead's as it last told it),
  // the whole step budget and every update the server applied.
  core::CheckpointManager checkpoints(storage, "mem://lead/ckpt", 3);
  Result<core::CheckpointState> state = checkpoints.LoadNewest();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->step, kSteps);
  EXPECT_EQ(state->world_size, 3);
  ASSERT_EQ(state->data_positions.size(), 3u);
  for (const std::string& p : state->data_positions) EXPECT_FALSE(p.empty());
  EXPECT_EQ(state->data_positions[0], l.position);
}

INSTANTIATE_TEST_SUITE_P(When, LostLead, ::testing::Values(When::kTraining, When::kFinalEvaluation),
                         [](const ::testing::TestParamInfo<When>& info) {
                           return info.param == When::kTraining ? "Training" : "FinalEvaluation";
                         });

}  // namespace
}  // namespace reel::async_sgd::lost_lead_test
