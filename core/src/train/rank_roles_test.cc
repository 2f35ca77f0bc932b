// The trainer asks an optimizer's RankRoles (reel/rank_roles.h) for what comes with roles: here
// the calls every run makes through it, with ranks that step together, and a server-only rank.
// Training ranks that step independently are covered end to end by async_sgd's tests
// (plugins/async_sgd/tests/: train_test, lost_worker_test, lost_lead_test, job_rate_test).
#include "reel/rank_roles.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

#include "train/testing.h"
#include "train/tiny_run.h"

namespace reel::core::rank_roles_test {

using testing::MemStorage;
using testing::TinyRank;

// TinySgd with roles, recording what the trainer asks of them.
class RecordingSgd : public testing::TinySgd, public RankRoles {
 public:
  explicit RecordingSgd(bool serves_only = false) : serves_only_(serves_only) {}
  RankRoles* rank_roles() override { return this; }
  Status Setup(ParamArena& arena, Communicator& comm) override {
    set_up_ = true;
    return TinySgd::Setup(arena, comm);
  }

  bool IsServerOnly() const override { return serves_only_; }
  bool HasServerOnlyRanks() const override { return serves_only_; }
  Status Serve() override {
    ++serves;
    return Status::Ok();
  }
  void OfferCheckpoints(const OptimizerCheckpoints& checkpoints) override {
    offered = checkpoints;
    offered_before_setup = !set_up_;
  }
  int64_t ScheduleStep(int64_t local_step) const override {
    schedule_steps.push_back(local_step);
    return local_step;
  }
  Status Refresh() override {
    ++refreshes;
    return Status::Ok();
  }
  void NoteStep(int64_t step, int64_t examples) override { noted.emplace_back(step, examples); }

  std::optional<OptimizerCheckpoints> offered;
  bool offered_before_setup = false;
  mutable std::vector<int64_t> schedule_steps;
  std::vector<std::pair<int64_t, int64_t>> noted;
  int refreshes = 0, serves = 0;

 private:
  const bool serves_only_;
  bool set_up_ = false;
};

TEST(RankRolesTest, TheTrainerAsksTheRolesForScheduleStepsNotesRefreshesAndCheckpoints) {
  MemStorage storage;
  TinyRank r(0, 1, 5);
  RecordingSgd optimizer;
  TrainerOptions o = testing::TinyTrainerOptions();
  o.steps = 6;  // one epoch of 6 batches
  o.eval_every_steps = 3;
  o.checkpoint_every_steps = 2;
  o.checkpoint_dir = "mem://roles";
  auto comm = testing::SoloCommunicator();
  RankComponents rc{&r.train, &r.eval, &r.model, &r.arena, &optimizer, comm.get()};
  Result<TrainResult> result = RunTrainer(o, rc, storage);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->independent);
  ASSERT_TRUE(optimizer.offered.has_value());
  EXPECT_TRUE(optimizer.offered_before_setup);
  EXPECT_EQ(optimizer.offered->dir, "mem://roles");
  EXPECT_EQ(optimizer.offered->every_steps, 2);
  EXPECT_EQ(optimizer.schedule_steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  const int64_t b = testing::kTinyBatch;
  EXPECT_EQ(optimizer.noted, (std::vector<std::pair<int64_t, int64_t>>{
                                 {1, b}, {2, b}, {3, b}, {4, b}, {5, b}, {6, b}}));
  EXPECT_EQ(optimizer.refreshes, 5);  // evaluations at steps 3 and 6, checkpoints at 2, 4 and 6
  EXPECT_EQ(optimizer.serves, 0);
}

TEST(RankRolesTest, AServerOnlyRankServesInsteadOfTraining) {
  MemStorage storage;
  TinyRank r(0, 1, 5);
  RecordingSgd optimizer(/*serves_only=*/true);
  auto comm = testing::SoloCommunicator();
  RankComponents rc{nullptr, nullptr, &r.model, &r.arena, &optimizer, comm.get(), comm.get()};
  Result<TrainResult> result = RunTrainer(testing::TinyTrainerOptions(), rc, storage);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->served_only);
  EXPECT_EQ(optimizer.serves, 1);
  EXPECT_TRUE(optimizer.noted.empty());
}

}  // namespace reel::core::rank_roles_test
