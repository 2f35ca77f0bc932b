// Faults in a distributed `reel train` under `reel launch` over the tcp transport (3 ranks as
// local processes): a rank killed with SIGKILL, every rank in turn, and a rank stopped with
// SIGSTOP, in the middle of training with a checkpoint every 2 steps. Each must end the run —
// no rank may hang — with the ranks left behind failing with Unavailable or DeadlineExceeded
// naming the rank at fault, launch exiting non-zero naming it, and the newest checkpoint intact:
// `reel train --resume` continues from it. (A link cut between hosts: tests/netns.)
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <vector>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e {
namespace {

constexpr int kRanks = 3;

class LaunchFaultTest : public ::testing::TestWithParam<int> {  // the rank at fault
 protected:
  void SetUp() override {
    std::string why;
    run_ = TrainRun::Make("launch_fault", kQuickFaultTransport, &why);
    if (!run_) GTEST_SKIP() << why;
  }

  // Starts the ranks training with no end in sight and waits until a checkpoint exists and a
  // few more steps have run, so the fault lands mid-training.
  std::unique_ptr<Background> StartTraining() {
    auto launch =
        run_->Start(kRanks,
                    {"--set", "trainer.steps=100000000", "--set",
                     "trainer.checkpoint_every_steps=2", "--set", "trainer.keep_checkpoints=0"},
                    {"--grace-seconds", "10"});
    EXPECT_TRUE(run_->WaitForCheckpoint()) << launch->err();
    EXPECT_TRUE(run_->WaitForSteps(5)) << launch->err();
    return launch;
  }

  // Every rank but `culprit` names it.
  static void ExpectOthersNameIt(const std::string& err, int culprit) {
    std::vector<int> others;
    for (int rank = 0; rank < kRanks; ++rank)
      if (rank != culprit) others.push_back(rank);
    ExpectSurvivorsNameIt(err, culprit, others);
  }

  // The newest complete checkpoint resumes on a new launch, which trains 2 more steps.
  void ExpectResumeContinues() {
    const std::vector<std::string> checkpoints = run_->Checkpoints();
    ASSERT_FALSE(checkpoints.empty());
    const std::string newest = checkpoints.back();
    const long step = CheckpointStep(newest);
    RunResult r =
        Reel({"launch", "-n", std::to_string(kRanks), "--", "reel", "train", "--config",
              run_->config(), "--resume", "--set", "trainer.steps=" + std::to_string(step + 2)});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("[rank 0] resumed from " + newest), std::string::npos) << r.err;
    for (int rank = 0; rank < kRanks; ++rank)
      EXPECT_NE(r.out.find("[rank " + std::to_string(rank) + "] trained " +
                           std::to_string(step + 2) + " steps"),
                std::string::npos)
          << r.out;
    EXPECT_EQ(CheckpointStep(run_->Checkpoints().back()), step + 2);
  }

  std::unique_ptr<TrainRun> run_;
};

using LaunchKillTest = LaunchFaultTest;
using LaunchStopTest = LaunchFaultTest;

TEST_P(LaunchKillTest, SurvivorsNameTheKilledRankAndResumeContinues) {
  const int victim = GetParam();
  auto launch = StartTraining();
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(::kill(run_->Pid(victim), SIGKILL), 0);
  const int code = WaitForTheEndAfterFault(*launch, std::chrono::steady_clock::now());
  const std::string err = launch->err();
  EXPECT_EQ(code, 128 + SIGKILL) << err;
  const std::string v = std::to_string(victim);
  // "; stopping the other N rank(s)" follows unless they had ended already.
  EXPECT_NE(err.find("reel launch: rank " + v + " was killed by signal 9 (SIGKILL)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("reel launch: UNAVAILABLE: rank " + v + " was killed by signal 9"),
            std::string::npos)
      << err;
  ExpectOthersNameIt(err, victim);
  ExpectResumeContinues();
}
INSTANTIATE_TEST_SUITE_P(EveryRank, LaunchKillTest, ::testing::Range(0, kRanks));

// A stopped rank is alive but silent: the others declare it failed after the heartbeat timeout
// and exit; launch names the stopped rank beside the first rank that exited, lets the stopped
// one run (SIGCONT after SIGTERM) so it ends too, and the checkpoint resumes.
TEST_P(LaunchStopTest, SurvivorsGiveUpOnTheStoppedRankAndResumeContinues) {
  const int victim = GetParam();
  auto launch = StartTraining();
  ASSERT_FALSE(HasFailure());
  const pid_t pid = run_->Pid(victim);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const int code = WaitForTheEndAfterFault(*launch, std::chrono::steady_clock::now());
  const std::string err = launch->err();
  EXPECT_NE(code, 0) << err;
  const std::string v = std::to_string(victim);
  EXPECT_NE(err.find("reel launch: rank " + v + " was stopped by signal 19 (SIGSTOP)\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(" while rank " + v + " was stopped by signal 19 (SIGSTOP); stopping"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("reel launch: UNAVAILABLE: rank "), std::string::npos) << err;
  EXPECT_NE(::kill(pid, 0), 0) << "the stopped rank (pid " << pid << ") outlived launch";
  ExpectOthersNameIt(err, victim);
  ExpectResumeContinues();
}
INSTANTIATE_TEST_SUITE_P(FirstAndLastRank, LaunchStopTest, ::testing::Values(0, kRanks - 1));

}  // namespace
}  // namespace reel::e2e
