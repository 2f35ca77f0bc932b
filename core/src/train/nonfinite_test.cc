// trainer.stop_on_nonfinite (docs/training.md): a NaN or infinite loss or gradient stops the run
// at its step, with the checkpoints written before it intact and resumable.
#include "train/nonfinite.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "optim/sync_optimizer.h"
#include "reel/core/checkpoint.h"
#include "reel/core/trainer.h"
#include "train/testing.h"
#include "train/tiny_run.h"

namespace reel::core::nonfinite_test {
namespace {

using ::testing::HasSubstr;
using testing::MemStorage;
using testing::TinyRank;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The training data of `inner`, with a NaN in the first feature value of its `at`-th batch
// (1-based, counted over the whole run).
class NanAtBatch : public DataSource {
 public:
  NanAtBatch(DataSource& inner, int at) : inner_(inner), at_(at) {}
  Result<Batch> Next() override {
    Result<Batch> b = inner_.Next();
    if (b.ok() && ++batches_ == at_) b->features.at("x").values.data()[0] = kNaN;
    return b;
  }
  Status StartEpoch(int64_t epoch) override { return inner_.StartEpoch(epoch); }
  Result<std::string> Position() const override { return inner_.Position(); }
  Status Restore(std::string_view p) override { return inner_.Restore(p); }

 private:
  DataSource& inner_;
  const int at_;
  int batches_ = 0;
};

// The tiny model, whose gradient of b[3] is +inf after its `at`-th backward pass (the loss stays
// finite). It makes it so before b is reported to a GradientSink, as a model must.
class InfGradientAt : public testing::TinyModel, public GradientSink {
 public:
  explicit InfGradientAt(int at) : TinyModel(testing::kTinyDim, testing::kTinyClasses), at_(at) {}
  Status DeclareParams(ParamArena& arena) override {
    arena_ = &arena;
    return TinyModel::DeclareParams(arena);
  }
  Status Backward(const Batch& batch, const Tensor& dlogits) override {
    ++calls_;
    REEL_RETURN_IF_ERROR(TinyModel::Backward(batch, dlogits));
    Poison();
    return Status::Ok();
  }
  void SetGradientSink(GradientSink* sink) override {
    next_ = sink;
    TinyModel::SetGradientSink(sink != nullptr ? this : nullptr);
  }
  void GradientsReady(int64_t offset, int64_t size) override {
    if (offset == arena_->block(*arena_->Find("b")).offset) Poison();
    next_->GradientsReady(offset, size);
  }

 private:
  // Once: after b was reported it may be on the wire, and the model must not write it again.
  void Poison() {
    if (calls_ != at_ || poisoned_) return;
    arena_->grads(*arena_->Find("b"))[3] = kInf;
    poisoned_ = true;
  }

  ParamArena* arena_ = nullptr;
  GradientSink* next_ = nullptr;
  const int at_;
  int calls_ = 0;
  bool poisoned_ = false;
};

bool Finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

TEST(NonFiniteTest, AllFiniteFindsNanAndInfAnywhereAndAcceptsTheLargestFloats) {
  std::vector<float> v(37, std::numeric_limits<float>::max());
  v[5] = -std::numeric_limits<float>::max();
  v[6] = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(AllFinite(v));  // their sum would overflow; the check does not sum
  for (float bad : {kNaN, kInf, -kInf})
    for (size_t at : {size_t{0}, size_t{17}, size_t{36}}) {
      std::vector<float> w = v;
      w[at] = bad;
      EXPECT_FALSE(AllFinite(w)) << bad << " at " << at;
    }
  EXPECT_TRUE(AllFinite({}));
}

// A gradient of 2^20 floats and more is checked on the OpenMP threads, each taking a contiguous
// half of the 8-float blocks: a NaN, +inf or -inf is found at the first element, either side of
// the halves' edge, the last whole block and the tail after it.
TEST(NonFiniteTest, AllFiniteOnTwoThreadsFindsNanAndInfInEachThreadsHalfAndTheTail) {
#if defined(REEL_TEST_UNDER_TSAN)
  GTEST_SKIP() << "libgomp's barriers are invisible to ThreadSanitizer (core/CMakeLists.txt)";
#endif
  const size_t n = (size_t{1} << 20) + 8 * 3 + 5;
  const size_t blocks = n / 8, edge = blocks / 2 * 8, tail = blocks * 8;
  std::vector<float> v(n, std::numeric_limits<float>::max());
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  EXPECT_TRUE(AllFinite(v));
  for (float bad : {kNaN, kInf, -kInf})
    for (size_t at : {size_t{0}, edge - 1, edge, tail - 1, tail, n - 1}) {
      const float kept = v[at];
      v[at] = bad;
      EXPECT_FALSE(AllFinite(v)) << bad << " at " << at;
      v[at] = kept;
    }
  omp_set_num_threads(saved);
}

TEST(NonFiniteTest, FirstNonFiniteNamesTheBlockAndIndex) {
  TinyRank r(0, 1, 5);
  EXPECT_EQ(FirstNonFinite(r.arena, r.arena.grads()), "");
  r.arena.grads(*r.arena.Find("b"))[7] = kNaN;
  EXPECT_EQ(FirstNonFinite(r.arena, r.arena.grads()), "b[7]");
  EXPECT_EQ(FirstNonFinite(r.arena, r.arena.values()), "");
}

TrainerOptions Checkpointed() {
  TrainerOptions o = testing::TinyTrainerOptions();
  o.checkpoint_dir = "mem://run/ckpt";
  o.checkpoint_every_steps = 4;
  return o;
}

// A NaN in the 7th batch's data: the run stops at step 7 naming the loss, the checkpoint of
// step 4 stays the newest, and a resume from it (with clean data) trains to the end.
TEST(NonFiniteTest, NanLossStopsAtItsStepKeepingTheLastFiniteCheckpointForResume) {
  MemStorage storage;
  {
    TinyRank r(0, 1, 5);
    NanAtBatch data(r.train, 7);
    RankComponents c = r.components(nullptr, false);
    auto comm = testing::SoloCommunicator();
    c.comm = comm.get();
    c.train = &data;
    auto result = RunTrainer(Checkpointed(), c, storage);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(result.status().message(), HasSubstr("training stopped at step 7: the loss is"));
    EXPECT_THAT(result.status().message(),
                HasSubstr("no checkpoint holds this step: the newest, mem://run/ckpt/" +
                          CheckpointName(4) + " (step 4), is intact"));
  }
  auto newest = LoadCheckpoint(storage, "mem://run/ckpt");
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->step, 4);
  for (const auto& b : newest->params) EXPECT_TRUE(Finite(b.values)) << b.name;
  TinyRank r(0, 1, 5);
  auto comm = testing::SoloCommunicator();
  TrainerOptions o = Checkpointed();
  o.resume = true;
  auto result = RunTrainer(o, r.components(comm.get(), false), storage);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->resumed);
  EXPECT_EQ(result->steps, 30);
  EXPECT_TRUE(std::isfinite(result->last_loss));
  EXPECT_TRUE(Finite(r.params()));
}

TEST(NonFiniteTest, InfiniteGradientIsNamedByParameterAndNothingIsApplied) {
  MemStorage storage;
  TinyRank r(0, 1, 5);
  InfGradientAt model(3);
  ParamArena arena;
  ASSERT_TRUE(model.DeclareParams(arena).ok());
  arena.Finalize();
  auto comm = testing::SoloCommunicator();
  RankComponents c = r.components(comm.get(), false);
  c.model = &model;
  c.arena = &arena;
  auto result = RunTrainer(testing::TinyTrainerOptions(), c, storage);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr("training stopped at step 3: the gradient of parameter b[3] on rank 0"));
  EXPECT_TRUE(Finite({arena.values().begin(), arena.values().end()}));
}

// An infinite learning rate from step 4 on (a staircase that jumps past the float range) turns
// finite gradients into infinite parameters: the checkpoint of step 4 is refused, the one of step 3
// stays the newest, and a resume from it with a sane rate trains to the end. On one rank and on
// two, which decide alike without a collective (the same parameters).
TEST(NonFiniteTest, NonFiniteParametersAreNeverCheckpointed) {
  for (const int world : {1, 2}) {
    SCOPED_TRACE("ranks: " + std::to_string(world));
    MemStorage storage;
    testing::TinyGroup group(world);
    TrainerOptions o = Checkpointed();
    o.checkpoint_every_steps = 1;
    o.learning_rate = {
        .base = 0.5, .schedule = "exponential", .decay_steps = 3, .decay_rate = 1e41};
    std::vector<Result<TrainResult>> results(world, Result<TrainResult>(InternalError("not run")));
    std::vector<std::thread> threads;
    for (int i = 0; i < world; ++i)
      threads.emplace_back([&, i] {
        results[i] =
            RunTrainer(o, group.ranks[i]->components(group.comms[i].get(), false), storage);
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < world; ++i) {
      ASSERT_FALSE(results[i].ok()) << "rank " << i;
      EXPECT_THAT(results[i].status().message(),
                  HasSubstr("training stopped at step 4: the parameters it made are not finite"));
    }
    auto newest = LoadCheckpoint(storage, "mem://run/ckpt");
    ASSERT_TRUE(newest.ok()) << newest.status();
    EXPECT_EQ(newest->step, 3);
    for (const auto& b : newest->params) EXPECT_TRUE(Finite(b.values)) << b.name;
    testing::TinyGroup again(world);
    o.learning_rate = {.base = 0.5};
    o.resume = true;
    threads.clear();
    for (int i = 0; i < world; ++i)
      threads.emplace_back([&, i] {
        results[i] =
            RunTrainer(o, again.ranks[i]->components(again.comms[i].get(), false), storage);
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < world; ++i) {
      ASSERT_TRUE(results[i].ok()) << results[i].status();
      EXPECT_EQ(results[i]->steps, 30);
      EXPECT_TRUE(Finite(again.ranks[i]->params()));
    }
  }
}

TEST(NonFiniteTest, OptOutTrainsOnThroughTheNan) {
  MemStorage storage;
  TinyRank r(0, 1, 5);
  NanAtBatch data(r.train, 7);
  auto comm = testing::SoloCommunicator();
  RankComponents c = r.components(comm.get(), false);
  c.train = &data;
  TrainerOptions o = Checkpointed();
  o.stop_on_nonfinite = false;
  auto result = RunTrainer(o, c, storage);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 30);
  EXPECT_FALSE(Finite(r.params()));  // what the check is there to prevent
}

// A NaN in rank 1's data only: the gradients reduced over the ranks carry it to rank 0, and both
// stop at step 5 (none waits in a collective for the other). With a third party's optimizer that
// leaves the trainer to clip (TinySgd), and with "sync", which clips after its allreduce: in one
// bucket, and in one per block started during backward (docs/distributed.md), where rank 1
// reduces its NaN step's gradient after backward, rank 0 during it.
class TwoRanks : public ::testing::TestWithParam<std::string> {};

// "sync" over `bucket_mb` ("" for its default).
std::unique_ptr<Optimizer> Sync(const std::string& bucket_mb) {
  std::map<std::string, std::string> given = {{"rule", "sgd"}};
  if (!bucket_mb.empty()) given["bucket_mb"] = bucket_mb;
  auto made = MakeSyncOptimizer(*ParseOptions(SyncOptimizerOptions(), given));
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

TEST_P(TwoRanks, BothStopAtTheStepOfOneRanksNan) {
  const bool sync = GetParam() != "TrainerClips";
  MemStorage storage;
  testing::TinyGroup group(2);
  NanAtBatch data(group.ranks[1]->train, 5);
  TrainerOptions o = Checkpointed();
  o.checkpoint_every_steps = 2;
  o.timeout = std::chrono::seconds(60);
  std::vector<Result<TrainResult>> results(2, Result<TrainResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      RankComponents c = group.ranks[i]->components(group.comms[i].get(), false);
      if (i == 1) c.train = &data;
      std::unique_ptr<Optimizer> optimizer;
      if (sync) {
        optimizer = Sync(GetParam() == "SyncBucketPerBlock" ? "0.000001" : "");
        ASSERT_NE(optimizer, nullptr);
        c.optimizer = optimizer.get();
      }
      results[i] = RunTrainer(o, c, storage);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_FALSE(results[i].ok()) << "rank " << i;
    EXPECT_EQ(results[i].status().code(), StatusCode::kFailedPrecondition) << results[i].status();
    EXPECT_THAT(results[i].status().message(), HasSubstr("training stopped at step 5: "));
  }
  EXPECT_THAT(results[1].status().message(), HasSubstr("the loss is"));
  EXPECT_THAT(results[1].status().message(), HasSubstr("on rank 1"));
  EXPECT_THAT(results[0].status().message(), HasSubstr("another rank's"));
  auto newest = LoadCheckpoint(storage, "mem://run/ckpt");
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->step, 4);
  for (const auto& b : newest->params) EXPECT_TRUE(Finite(b.values)) << b.name;
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TwoRanks,
                         ::testing::Values("TrainerClips", "Sync", "SyncBucketPerBlock"),
                         [](const auto& info) { return info.param; });

// An infinite gradient on rank 1 while "sync" reduces buckets during backward: the trainer
// checked b before it went on the wire, so rank 1 names it; rank 0 sees it in the reduced
// gradient; both stop at step 5, and the checkpoint of step 4 is the newest.
TEST(NonFiniteTest, AGradientReducedDuringBackwardIsCheckedBeforeItIsSent) {
  MemStorage storage;
  testing::TinyGroup group(2);
  InfGradientAt bad_model(5);
  ParamArena bad_arena;
  ASSERT_TRUE(bad_model.DeclareParams(bad_arena).ok());
  bad_arena.Finalize();
  TrainerOptions o = Checkpointed();
  o.checkpoint_every_steps = 2;
  o.timeout = std::chrono::seconds(60);
  std::vector<Result<TrainResult>> results(2, Result<TrainResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      RankComponents c = group.ranks[i]->components(group.comms[i].get(), false);
      if (i == 1) {
        c.model = &bad_model;
        c.arena = &bad_arena;
      }
      std::unique_ptr<Optimizer> optimizer = Sync("0.000001");
      ASSERT_NE(optimizer, nullptr);
      c.optimizer = optimizer.get();
      results[i] = RunTrainer(o, c, storage);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_FALSE(results[i].ok()) << "rank " << i;
    EXPECT_THAT(results[i].status().message(), HasSubstr("training stopped at step 5: "));
  }
  EXPECT_THAT(results[1].status().message(), HasSubstr("the gradient of parameter b[3] on rank 1"));
  EXPECT_THAT(results[0].status().message(), HasSubstr("another rank's"));
  auto newest = LoadCheckpoint(storage, "mem://run/ckpt");
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->step, 4);
  for (const auto& b : newest->params) EXPECT_TRUE(Finite(b.values)) << b.name;
}

}  // namespace
}  // namespace reel::core::nonfinite_test
