// Faults in a distributed `reel train` under `reel launch` over the tcp transport (3 ranks as
// local processes): a rank killed with SIGKILL, every rank in turn, and a rank stopped with
// SIGSTOP, in the middle of training with a checkpoint every 2 steps. Each must end the run —
// no rank may hang — with the ranks left behind failing with Unavailable or DeadlineExceeded
// naming the rank at fault, launch exiting non-zero naming it, and the newest checkpoint intact:
// `reel train --resume` continues from it. (A link cut between hosts: tests/netns.)
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e {
namespace {

using namespace std::chrono_literals;

// A silent peer is declared failed after 2 s; a collective gives up after 20 s.
constexpr char kTransport[] = R"(
transport {
  name: "tcp"
  timeout_seconds: 20
  options { key: "heartbeat_ms" value: "100" }
  options { key: "heartbeat_timeout_ms" value: "2000" }
}
)";
constexpr int kRanks = 3;
// Far beyond the heartbeat timeout, a collective's timeout and launch's grace period together:
// only a hang reaches it. Not a timing assertion.
constexpr auto kNoHang = 180s;

class LaunchFaultTest : public ::testing::TestWithParam<int> {  // the rank at fault
 protected:
  void SetUp() override {
    std::string why;
    run_ = TrainRun::Make("launch_fault", kTransport, &why);
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

  // Waits for launch to end; a hang fails the test (and the destructor kills what is left).
  int WaitForTheEnd(Background& launch, std::chrono::steady_clock::time_point fault) {
    std::optional<int> code = launch.WaitAtMost(kNoHang);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - fault).count();
    std::cout << "launch ended " << seconds << " s after the fault, status "
              << (code ? std::to_string(*code) : "none (hung)") << "\n";
    EXPECT_TRUE(code.has_value()) << "launch still runs long after the fault: a rank hangs\n"
                                  << launch.err();
    return code.value_or(-1);
  }

  // Every rank other than `culprit` failed with Unavailable or DeadlineExceeded naming it. The
  // transport's own line ("rank N is unavailable: ...") counts too: launch stops the survivors as
  // soon as it sees the killed rank, which can be before a survivor's trainer prints its status.
  static void ExpectSurvivorsNameIt(const std::string& err, int culprit) {
    const std::string named = "rank " + std::to_string(culprit);
    for (int rank = 0; rank < kRanks; ++rank) {
      if (rank == culprit) continue;
      const std::string prefix = "[rank " + std::to_string(rank) + "] ";
      bool names_it = false;
      for (const std::string& line : Lines(err))
        if (line.rfind(prefix, 0) == 0 &&
            (line.find("UNAVAILABLE") != std::string::npos ||
             line.find("DEADLINE_EXCEEDED") != std::string::npos ||
             line.find(named + " is unavailable") != std::string::npos) &&
            line.find(named, prefix.size()) != std::string::npos)
          names_it = true;
      EXPECT_TRUE(names_it) << "rank " << rank << " does not name " << named << ":\n" << err;
    }
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
  const int code = WaitForTheEnd(*launch, std::chrono::steady_clock::now());
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
  ExpectSurvivorsNameIt(err, victim);
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
  const int code = WaitForTheEnd(*launch, std::chrono::steady_clock::now());
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
  ExpectSurvivorsNameIt(err, victim);
  ExpectResumeContinues();
}
INSTANTIATE_TEST_SUITE_P(FirstAndLastRank, LaunchStopTest, ::testing::Values(0, kRanks - 1));

}  // namespace
}  // namespace reel::e2e
