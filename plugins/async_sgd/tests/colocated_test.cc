// Colocated async_sgd under the trainer, ranks as threads: every rank trains and serves a shard
// from a thread of its own, so a slow rank holds up nobody. Counted, not timed: the slow rank's
// data source gives its first batch only once the other ranks have taken every batch of their
// run; a trainer that stepped in lockstep would hold them at their first step instead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ranks.h"

namespace reel::async_sgd::colocated_test {
namespace {

using core::testing::TinySource;

constexpr int kWorld = 3, kSteps = 12, kDim = 6, kClasses = 12;

// Counts the batches every rank took; the slow rank's first one waits until the others took
// `kSteps` each (or a generous limit passed, so that a broken trainer fails instead of hanging).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int taken[kWorld] = {};
  int others_when_released = -1;  // batches the fast ranks had taken when the slow one started

  void Took(int rank) {
    std::lock_guard<std::mutex> lock(mu);
    ++taken[rank];
    cv.notify_all();
  }
  void WaitForTheOthers() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::minutes(1),
                [this] { return taken[0] >= kSteps && taken[1] >= kSteps; });
    others_when_released = std::min(taken[0], taken[1]);
  }
};

class GatedSource : public DataSource {
 public:
  GatedSource(int rank, Gate& gate)
      : inner_(96, kDim, kClasses, 4, 7, {rank, kWorld}), rank_(rank), gate_(gate) {}
  Result<Batch> Next() override {
    if (rank_ == kWorld - 1 && !released_) {
      gate_.WaitForTheOthers();
      released_ = true;
    }
    Result<Batch> b = inner_.Next();
    if (b.ok()) gate_.Took(rank_);
    return b;
  }
  Status StartEpoch(int64_t epoch) override { return inner_.StartEpoch(epoch); }
  Result<std::string> Position() const override { return inner_.Position(); }
  Status Restore(std::string_view p) override { return inner_.Restore(p); }

 private:
  TinySource inner_;
  const int rank_;
  Gate& gate_;
  bool released_ = false;
};

TEST(AsyncSgdColocated, ASlowRankHoldsUpNoOther) {
  Gate gate;
  core::testing::MemStorage storage;
  std::vector<Result<core::TrainResult>> results =
      OnRankThreads(kWorld, [&](int r, auto& comm) -> Result<core::TrainResult> {
        REEL_ASSIGN_OR_RETURN(
            Options o, ParseOptions(AsyncOptions(), {{"colocated", "true"}, {"rule", "sgd"}}));
        REEL_ASSIGN_OR_RETURN(auto opt, AsyncOptimizer::Create(o, {r, kWorld}));
        EXPECT_TRUE(opt->TrainsIndependently());
        REEL_ASSIGN_OR_RETURN(auto group, comm->Split(0, r, DeadlineIn(std::chrono::minutes(1))));
        GatedSource train(r, gate);
        return TrainTinyRank(*opt, *comm, *group, &train, kSteps, kDim, kClasses, storage);
      });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(results[r]->steps, kSteps) << "rank " << r;
  }
  // The fast ranks had taken every batch of their run before the slow one took its first.
  EXPECT_EQ(gate.others_when_released, kSteps);
  EXPECT_EQ(gate.taken[kWorld - 1], kSteps);
}

}  // namespace
}  // namespace reel::async_sgd::colocated_test
