// Resuming several ranks from rank 0's checkpoint: ranks with their own disks (a storage each)
// resume from what rank 0 read, and a rank that sees another checkpoint stops every rank.
#include "train/shared_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/trainer.h"
#include "train/testing.h"

namespace reel::core::shared_checkpoint_test {
namespace {

using ::testing::HasSubstr;

constexpr int kDim = 4, kClasses = 6, kVideos = 40, kBatch = 4;

struct RankRun {
  Result<TrainResult> result = InternalError("not run");
  std::vector<float> params;
};

// Two ranks, rank i with its own storage (its own disk).
std::vector<RankRun> TwoRanks(testing::MemStorage* disks[2], const TrainerOptions& o) {
  auto group = CreateInprocGroup(2);
  EXPECT_TRUE(group.ok());
  std::vector<RankRun> runs(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      auto comm = WithRingCollectives(std::move((*group)[static_cast<size_t>(i)]));
      testing::TinySource train(kVideos, kDim, kClasses, kBatch, 3, {i, 2});
      ParamArena arena;
      testing::TinyModel model(kDim, kClasses);
      testing::TinySgd optimizer;
      EXPECT_TRUE(model.DeclareParams(arena).ok());
      arena.Finalize();
      RankComponents rc{&train, nullptr, &model, &arena, &optimizer, comm.get()};
      runs[static_cast<size_t>(i)].result = RunTrainer(o, rc, *disks[i]);
      runs[static_cast<size_t>(i)].params.assign(arena.values().begin(), arena.values().end());
    });
  for (auto& t : threads) t.join();
  return runs;
}

TrainerOptions Options() {
  TrainerOptions o;
  o.steps = 8;
  o.seed = 7;
  o.learning_rate.base = 0.3;
  o.num_classes = kClasses;
  o.model_name = "tiny";
  o.checkpoint_dir = "mem://ckpt";
  return o;
}

TEST(SharedCheckpoint, RanksWithTheirOwnDisksResumeFromRankZeros) {
  testing::MemStorage a0, a1, b0, b1;
  testing::MemStorage* uninterrupted[2] = {&a0, &a1};
  std::vector<RankRun> want = TwoRanks(uninterrupted, Options());
  ASSERT_TRUE(want[0].result.ok()) << want[0].result.status();

  testing::MemStorage* disks[2] = {&b0, &b1};
  TrainerOptions first = Options();
  first.should_stop = [](int64_t step) { return step >= 3; };
  for (auto& run : TwoRanks(disks, first)) ASSERT_TRUE(run.result.ok()) << run.result.status();
  ASSERT_FALSE(b0.objects().empty()) << "rank 0 wrote no checkpoint";
  ASSERT_TRUE(b1.objects().empty()) << "only rank 0 writes checkpoints";

  TrainerOptions second = Options();
  second.resume = true;
  std::vector<RankRun> resumed = TwoRanks(disks, second);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(resumed[i].result.ok()) << "rank " << i << ": " << resumed[i].result.status();
    EXPECT_TRUE(resumed[i].result->resumed) << "rank " << i;
    EXPECT_EQ(resumed[i].params, want[0].params) << "rank " << i;
  }
}

void ExpectEveryRankRefuses(const std::vector<RankRun>& runs, const std::string& text) {
  for (int i = 0; i < 2; ++i) {
    ASSERT_FALSE(runs[i].result.ok()) << "rank " << i;
    EXPECT_EQ(runs[i].result.status().code(), StatusCode::kFailedPrecondition)
        << "rank " << i << ": " << runs[i].result.status();
    EXPECT_THAT(runs[i].result.status().message(), HasSubstr(text)) << "rank " << i;
  }
}

TEST(SharedCheckpoint, ARankThatSeesAnotherCheckpointStopsEveryRank) {
  testing::MemStorage d0, d1;
  testing::MemStorage* disks[2] = {&d0, &d1};
  TrainerOptions first = Options();
  first.should_stop = [](int64_t step) { return step >= 3; };
  for (auto& run : TwoRanks(disks, first)) ASSERT_TRUE(run.result.ok()) << run.result.status();
  // Rank 1's disk holds a checkpoint of another step (a stale copy from an older run).
  for (const auto& [uri, bytes] : d0.objects()) d1.Put("mem://ckpt/" + CheckpointName(2), bytes);
  TrainerOptions second = Options();
  second.resume = true;
  ExpectEveryRankRefuses(TwoRanks(disks, second),
                         "rank 1 finds checkpoint mem://ckpt/" + CheckpointName(2) +
                             " but rank 0 resumes from mem://ckpt/" + CheckpointName(3));
}

TEST(SharedCheckpoint, ARankWithACheckpointWhereRankZeroHasNoneStopsEveryRank) {
  testing::MemStorage d0, d1, scratch0, scratch1;
  testing::MemStorage* elsewhere[2] = {&scratch0, &scratch1};
  TrainerOptions first = Options();
  first.should_stop = [](int64_t step) { return step >= 2; };
  for (auto& run : TwoRanks(elsewhere, first)) ASSERT_TRUE(run.result.ok());
  for (const auto& [uri, bytes] : scratch0.objects()) d1.Put(uri, bytes);
  testing::MemStorage* disks[2] = {&d0, &d1};
  TrainerOptions second = Options();
  second.resume = true;
  ExpectEveryRankRefuses(TwoRanks(disks, second), "but rank 0 finds none");
}

TEST(SharedCheckpoint, ADamagedCheckpointOnRankZerosDiskStopsEveryRankNamingIt) {
  testing::MemStorage d0, d1;
  testing::MemStorage* disks[2] = {&d0, &d1};
  TrainerOptions first = Options();
  first.should_stop = [](int64_t step) { return step >= 3; };
  for (auto& run : TwoRanks(disks, first)) ASSERT_TRUE(run.result.ok()) << run.result.status();
  const std::string newest = "mem://ckpt/" + CheckpointName(3);
  std::string bytes;
  for (const auto& [uri, b] : d0.objects())
    if (uri == newest) bytes = b;
  ASSERT_FALSE(bytes.empty()) << "no " << newest;
  bytes[bytes.size() / 2] ^= 0x5a;  // a flipped byte inside the payload
  d0.Put(newest, bytes);
  TrainerOptions second = Options();
  second.resume = true;
  std::vector<RankRun> runs = TwoRanks(disks, second);
  for (int i = 0; i < 2; ++i) {
    ASSERT_FALSE(runs[i].result.ok()) << "rank " << i;
    EXPECT_EQ(runs[i].result.status().code(), StatusCode::kDataLoss)
        << "rank " << i << ": " << runs[i].result.status();
    EXPECT_THAT(runs[i].result.status().message(), HasSubstr(newest)) << "rank " << i;
  }
  std::string kept;
  for (const auto& [uri, b] : d0.objects())
    if (uri == newest) kept = b;
  EXPECT_EQ(kept, bytes) << "the damaged checkpoint is left as it was, for a person to look at";
}

}  // namespace
}  // namespace reel::core::shared_checkpoint_test
