// Faults in `reel train` with async_sgd under `reel launch --keep-going` over tcp (3 processes:
// rank 0 the parameter server, ranks 1 (the lead worker) and 2 workers), the transport tuned as
// a user would to detect faults quickly (launch_util.h, kQuickFaultTransport: heartbeat every
// 100 ms, a peer silent for 2 s is failed). Each rank in turn is killed with SIGKILL or paused
// with SIGSTOP mid-training. No rank may hang:
//   * the server: every worker fails with Unavailable naming it, launch exits non-zero naming
//     it (a stopped server ends too), and `--resume` continues from the newest checkpoint;
//   * a worker, the lead or not: the server drops it (at once when killed, after the heartbeat
//     timeout when stopped), the others finish the run (a lost lead is replaced), its untrained
//     share is reported from what the server applied of it, launch exits 0 naming it (a stopped
//     worker is ended once every other rank has), and `--resume` continues from the final
//     checkpoint.
// Kills with the transport's default heartbeats, on 4 ranks, are in train_test.cc (AKilled*,
// which also run under ThreadSanitizer); these rely on a 2 s heartbeat timeout and stay out of it
// (built into tests/e2e's reel_launch_tests, label launch, for its helpers).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <ostream>
#include <regex>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "launch_util.h"
#include "lost_share.h"

namespace reel::e2e::async_sgd_launch_fault_test {
namespace {

constexpr int kRanks = 3;     // server 0, workers 1 (the lead) and 2
constexpr int kBudget = 200;  // steps per worker when a worker is at fault
constexpr int kBatch = 4;     // TrainRun's batch size
constexpr int kServer = 0, kLead = 1, kOtherWorker = 2;

struct Fault {
  int signal;  // SIGKILL or SIGSTOP
  int victim;  // rank
};

std::string Describe(const Fault& f) {
  const char* who[] = {"Server", "Lead", "OtherWorker"};
  return std::string(f.signal == SIGKILL ? "Kill" : "Stop") + who[f.victim];
}
std::string FaultName(const ::testing::TestParamInfo<Fault>& info) { return Describe(info.param); }
void PrintTo(const Fault& f, std::ostream* os) { *os << Describe(f); }

class AsyncLaunchFaultTest : public ::testing::TestWithParam<Fault> {
 protected:
  void SetUp() override {
    if (Reel({"plugins", "show", "async_sgd"}).code != 0)
      GTEST_SKIP() << "this build has no 'async_sgd' component";
    std::string why;
    run_ = TrainRun::Make("async_launch_fault",
                          std::string(kQuickFaultTransport) +
                              "optimizer {\n  name: \"async_sgd\"\n"
                              "  options { key: \"rule\" value: \"adagrad\" }\n}\n",
                          &why);
    if (!run_) GTEST_SKIP() << why;
  }

  // Starts the ranks (`steps` per worker, a checkpoint every `checkpoint_every` steps) and
  // waits until a checkpoint exists and the lead took a few more steps, so the fault lands
  // mid-training.
  std::unique_ptr<Background> StartTraining(int steps, int checkpoint_every) {
    auto launch =
        run_->Start(kRanks,
                    {"--set", "trainer.steps=" + std::to_string(steps), "--set",
                     "trainer.checkpoint_every_steps=" + std::to_string(checkpoint_every)},
                    {"--keep-going", "--grace-seconds", "10"});
    EXPECT_TRUE(run_->WaitForCheckpoint()) << launch->err();
    EXPECT_TRUE(run_->WaitForSteps(checkpoint_every + 3)) << launch->err();
    return launch;
  }

  // A new launch resumes from the newest checkpoint and trains to `steps` on every worker: the
  // lead exactly; the other worker resumes at its own step in the checkpoint, which may already
  // be past `steps` (it was ahead of the lead when the lead wrote it).
  void ExpectResumeContinuesTo(long steps) {
    const std::vector<std::string> checkpoints = run_->Checkpoints();
    ASSERT_FALSE(checkpoints.empty());
    const std::string newest = checkpoints.back();
    RunResult r = Reel({"launch", "-n", std::to_string(kRanks), "--keep-going", "--", "reel",
                        "train", "--config", run_->config(), "--resume", "--set",
                        "trainer.steps=" + std::to_string(steps)});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("] resumed from " + newest), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("[rank 0] served parameters until every worker finished"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("[rank " + std::to_string(kLead) + "] trained " + std::to_string(steps) +
                         " steps"),
              std::string::npos)
        << r.out;
    // (A worker already past `steps` trains nothing and says so.)
    std::smatch other;
    ASSERT_TRUE(std::regex_search(
        r.out, other,
        std::regex("\\[rank " + std::to_string(kOtherWorker) +
                   "\\] (?:trained |nothing left to train: the checkpoint had reached the "
                   "budget \\()(\\d+) steps")))
        << r.out;
    EXPECT_GE(std::stol(other[1]), steps) << r.out;
    EXPECT_EQ(CheckpointStep(run_->Checkpoints().back()), steps);
  }

  std::unique_ptr<TrainRun> run_;
};

TEST_P(AsyncLaunchFaultTest, NoRankHangsTheFaultIsNamedAndResumeContinues) {
  const auto [sig, victim] = GetParam();
  const bool server = victim == kServer;
  // A server at fault ends the run; a worker at fault leaves the others a budget to finish
  // (and checkpoints, which the lead gathers from the server, less often).
  auto launch = server ? StartTraining(100000000, 2) : StartTraining(kBudget, 10);
  ASSERT_FALSE(HasFailure());
  const pid_t pid = run_->Pid(victim);
  ASSERT_EQ(::kill(pid, sig), 0);
  const int code = WaitForTheEndAfterFault(*launch, std::chrono::steady_clock::now());
  const std::string err = launch->err(), out = launch->out();
  const std::string v = std::to_string(victim);
  EXPECT_NE(err.find("reel launch: rank " + v +
                     (sig == SIGKILL ? " was killed by signal 9 (SIGKILL)"
                                     : " was stopped by signal 19 (SIGSTOP)")),
            std::string::npos)
      << err;
  EXPECT_NE(::kill(pid, 0), 0) << "rank " << victim << " (pid " << pid << ") outlived launch";
  if (server) {
    EXPECT_NE(code, 0) << err;
    ExpectSurvivorsNameIt(err, kServer, {kLead, kOtherWorker});
    ExpectResumeContinuesTo(CheckpointStep(run_->Checkpoints().back()) + 2);
    return;
  }
  // Launch's status is rank 0's: the server served the workers left until they finished.
  EXPECT_EQ(code, 0) << err;
  const int lead = victim == kLead ? kOtherWorker : kLead;
  if (victim == kLead) {
    EXPECT_NE(err.find("[rank 2] training rank 1 (rank 2) takes over as the lead from training "
                       "rank 0 (rank 1), which was lost"),
              std::string::npos)
        << err;
  }
  EXPECT_NE(
      out.find("[rank " + std::to_string(lead) + "] trained " + std::to_string(kBudget) + " steps"),
      std::string::npos)
      << out << err;
  ExpectTheLostShareFromTheServersCount(out + err, victim, lead, kBudget, kBatch);
  EXPECT_EQ(CheckpointStep(run_->Checkpoints().back()), kBudget);
  ExpectResumeContinuesTo(kBudget + 2);
}

INSTANTIATE_TEST_SUITE_P(EveryRank, AsyncLaunchFaultTest,
                         ::testing::Values(Fault{SIGKILL, kServer}, Fault{SIGSTOP, kServer},
                                           Fault{SIGKILL, kLead}, Fault{SIGSTOP, kLead},
                                           Fault{SIGKILL, kOtherWorker},
                                           Fault{SIGSTOP, kOtherWorker}),
                         FaultName);

}  // namespace
}  // namespace reel::e2e::async_sgd_launch_fault_test
