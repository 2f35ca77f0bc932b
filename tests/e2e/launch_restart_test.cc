// `reel launch --max-restarts N` (docs/distributed.md, "Restarts"): a failed attempt whose
// failure a restart may cure (a rank killed by a signal, or exiting 75: a lost peer) is stopped and
// started again with REEL_RESTART_COUNT, a new job identity and port; a rank's own error (a
// config error) is not restarted; one failure more than N ends the launch naming every failure;
// SIGTERM to the launcher stops everything without a restart. With `reel train` over the tcp
// transport, a restarted attempt resumes from the newest checkpoint and trains each example of
// the epoch once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

// Waits (generously; not a timing assertion) until `path` exists.
bool WaitForFile(const std::string& path) {
  for (int i = 0; i < 3000; ++i) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Rank 1 kills itself in every attempt; rank 0 waits to be stopped. Each attempt's ranks get
// their restart count, the job identity with it and a coordinator; the third failure (two
// restarts allowed) ends the launch naming all three, with the killed rank's exit code.
TEST(LaunchRestartTest, FailuresBeyondMaxRestartsEndTheLaunchNamingEach) {
  ::unsetenv("REEL_JOB_ID");
  RunResult r = LaunchSh({"-n", "2", "--max-restarts", "2"},
                         "echo $REEL_RESTART_COUNT $REEL_JOB_ID $REEL_COORDINATOR; "
                         "if [ $REEL_RANK = 1 ]; then kill -9 $$; fi; exec sleep 600");
  EXPECT_EQ(r.code, 128 + SIGKILL) << r.err;
  std::vector<std::string> said;  // rank 1's lines, one per attempt
  for (const std::string& line : Lines(r.out))
    if (line.rfind("[rank 1] ", 0) == 0) said.push_back(line.substr(9));
  ASSERT_EQ(said.size(), 3u) << r.out;
  const std::string id = said[0].substr(2, said[0].find(' ', 2) - 2);
  EXPECT_EQ(id.rfind("launch-", 0), 0u) << r.out;
  for (int k = 0; k < 3; ++k) {
    const std::string want = std::to_string(k) + " " + id +
                             (k == 0 ? "" : ".restart-" + std::to_string(k)) + " 127.0.0.1:";
    EXPECT_EQ(said[k].substr(0, want.size()), want) << r.out;
  }
  for (int k : {1, 2})
    EXPECT_NE(r.err.find("reel launch: restart " + std::to_string(k) +
                         " of 2: starting the 2 rank(s) again (REEL_RESTART_COUNT=" +
                         std::to_string(k) + ")\n"),
              std::string::npos)
        << r.err;
  EXPECT_EQ(r.err.find("restart 3"), std::string::npos) << r.err;
  const std::string killed = "rank 1 was killed by signal 9 (SIGKILL)";
  EXPECT_NE(r.err.find("reel launch: UNAVAILABLE: " + killed +
                       " after 2 restart(s), the most --max-restarts allows; every failure: "
                       "attempt 0: " +
                       killed + "; attempt 1: " + killed + "; attempt 2: " + killed + "\n"),
            std::string::npos)
      << r.err;
}

// Refused before any rank starts: a bad count, and a job identity that the last attempt's suffix
// would take over 64 bytes. A bad REEL_RESTART_COUNT is refused by `reel train`, naming it.
TEST(LaunchRestartTest, BadRestartSettingsAreRefusedBeforeAnyRankStarts) {
  const std::string marker = ScratchDir("launch_restart_bad") + "/started";
  for (const char* n : {"-1", "1001", "x"}) {
    RunResult r = Reel({"launch", "-n", "1", "--max-restarts", n, "--", "touch", marker});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("flag '--max-restarts'"), std::string::npos) << r.err;
  }
  const std::string id(56, 'j');  // + ".restart-10": 67 bytes
  ::setenv("REEL_JOB_ID", id.c_str(), 1);
  RunResult r = Reel({"launch", "-n", "1", "--max-restarts", "10", "--", "touch", marker});
  ::unsetenv("REEL_JOB_ID");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("job identity '" + id +
                       "' is too long for --max-restarts 10: the last "
                       "attempt's, '" +
                       id + ".restart-10', would be over 64 bytes"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(marker)) << "a rank was started";

  std::string why;
  auto run = TrainRun::Make("launch_restart_bad_count", "", &why);
  if (!run) GTEST_SKIP() << why;
  ::setenv("REEL_RESTART_COUNT", "abc", 1);
  r = Reel({"train", "--config", run->config(), "--set", "trainer.steps=1"});
  ::unsetenv("REEL_RESTART_COUNT");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("REEL_RESTART_COUNT=\"abc\" is not a number of restarts"), std::string::npos)
      << r.err;
  EXPECT_TRUE(run->Checkpoints().empty()) << "trained with a bad restart count";
}

// A rank's own error repeats in every attempt: not restarted, however many restarts are allowed.
// A real one (a config file that does not exist) and a shell's exit 1; exit 75 (a lost peer or
// service, as reel exits on Unavailable) is restarted.
TEST(LaunchRestartTest, ARanksOwnErrorIsNotRestarted) {
  RunResult r = Reel({"launch", "-n", "2", "--max-restarts", "3", "--", "reel", "train", "--config",
                      "/no/such/dir/run.pbtxt"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find(" exited with status 1 in attempt 0; not restarted: a restart would repeat "
                       "it (only a rank killed by a signal or exiting with status 75, a lost peer "
                       "or service, is restarted)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("REEL_RESTART_COUNT=1"), std::string::npos) << r.err;

  r = LaunchSh({"-n", "2", "--max-restarts", "3"},
               "echo attempt $REEL_RESTART_COUNT; if [ $REEL_RANK = 0 ]; then exit 1; fi; "
               "exec sleep 600");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.out.find("attempt 1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("reel launch: UNAVAILABLE: rank 0 exited with status 1 in attempt 0; not "
                       "restarted"),
            std::string::npos)
      << r.err;

  r = LaunchSh(
      {"-n", "1", "--max-restarts", "1"},
      "if [ $REEL_RESTART_COUNT = 0 ]; then exit 75; fi; echo attempt $REEL_RESTART_COUNT");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[rank 0] attempt 1\n") << r.err;
  EXPECT_NE(r.err.find("reel launch: rank 0 exited with status 75\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("reel launch: restart 1 of 1:"), std::string::npos) << r.err;
}

// Rank 1 stops itself; rank 0 waits for that, then is killed. The failure names both, the stopped
// rank is let run to end (its TERM trap), and the second attempt runs both ranks to success.
TEST(LaunchRestartTest, AStoppedRankThenAnotherKilledAreBothRestarted) {
  const std::string dir = ScratchDir("launch_restart_stop");
  RunResult r =
      LaunchSh({"-n", "2", "--max-restarts", "1", "--grace-seconds", "600"},
               "if [ $REEL_RESTART_COUNT = 1 ]; then echo attempt 1; exit 0; fi; "
               "if [ $REEL_RANK = 1 ]; then trap 'echo got TERM; exit 7' TERM; echo $$ > " +
                   dir +
                   "/pid.1; kill -STOP $$; exit 9; fi; "
                   "while [ ! -e " +
                   dir + "/pid.1 ] || ! grep -q '^[0-9]* ([^)]*) T' /proc/$(cat " + dir +
                   "/pid.1)/stat 2>/dev/null; do sleep 0.05; done; kill -9 $$");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("reel launch: rank 0 was killed by signal 9 (SIGKILL) while rank 1 was "
                       "stopped by signal 19 (SIGSTOP); stopping the other 1 rank(s)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("reel launch: restart 1 of 1: starting the 2 rank(s) again"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("grace period over"), std::string::npos) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"[rank 0] attempt 1", "[rank 1] attempt 1",
                                             "[rank 1] got TERM"}))
      << r.out;
  fs::remove_all(dir);
}

// SIGTERM to the launcher once a restarted attempt runs: passed to its ranks, the launch exits
// 130 and starts no other attempt.
TEST(LaunchRestartTest, SigtermDuringARestartStopsWithoutAnother) {
  const std::string dir = ScratchDir("launch_restart_term");
  Background launch(dir, {"launch", "-n", "2", "--max-restarts", "5", "--", "sh", "-c",
                          "echo $$ > " + dir +
                              "/pid.$REEL_RESTART_COUNT.$REEL_RANK; "
                              "if [ $REEL_RESTART_COUNT = 0 ] && [ $REEL_RANK = 1 ]; then kill -9 "
                              "$$; fi; exec sleep 600"});
  ASSERT_TRUE(launch.started());
  ASSERT_TRUE(WaitForFile(dir + "/pid.1.0") && WaitForFile(dir + "/pid.1.1")) << launch.err();
  launch.Signal(SIGTERM);
  const std::optional<int> code = launch.WaitAtMost(std::chrono::seconds(120));
  ASSERT_TRUE(code.has_value()) << launch.err();
  EXPECT_EQ(*code, 130) << launch.err();
  const std::string err = launch.err();
  EXPECT_NE(err.find("reel launch: got SIGTERM; passing it to 2 rank(s)"), std::string::npos)
      << err;
  EXPECT_EQ(err.find("restart 2"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir + "/pid.2.0")) << err;
  for (int rank : {0, 1})
    EXPECT_NE(::kill(std::stoi(ReadFile(dir + "/pid.1." + std::to_string(rank))), 0), 0)
        << "rank " << rank << " outlived launch";
  fs::remove_all(dir);
}

// `reel train --config run.pbtxt` with a checkpoint every 2 steps, as a shell command; more --set
// lines may follow.
std::string TrainCommand(const TrainRun& run) {
  return std::string("'") + REEL_EXE + "' train --config '" + run.config() +
         "' --set trainer.checkpoint_every_steps=2 --set trainer.keep_checkpoints=0 ";
}

// `reel train` ranks under `--max-restarts 1`, over tcp with quick fault detection; each writes
// its pid to dir/pid.RANK. The first attempt trains `first`, a restarted one `then` (--set
// lines, a shell word each). `launch_flags` (default: 3 ranks on this node) come first; the
// launch's output goes to `out_dir` (default: the run's).
std::unique_ptr<Background> StartRestartingTraining(
    const TrainRun& run, const std::string& first, const std::string& then,
    std::vector<std::string> launch_flags = {"-n", "3"}, std::string out_dir = "") {
  std::vector<std::string> args = {"launch"};
  args.insert(args.end(), launch_flags.begin(), launch_flags.end());
  args.insert(args.end(), {"--max-restarts", "1", "--grace-seconds", "10", "--", "sh", "-c",
                           "echo $$ > '" + run.dir() +
                               "/pid.'$REEL_RANK; if [ $REEL_RESTART_COUNT = 0 ]; then " + first +
                               "; else exec " + TrainCommand(run) + then + "; fi"});
  return std::make_unique<Background>(out_dir.empty() ? run.dir() : out_dir, args);
}

// A rank SIGKILLed mid-training (all three held stopped meanwhile, so the newest checkpoint is
// known): the launcher restarts the three, they resume from the newest checkpoint by themselves
// and train to the budget; the launch exits 0.
TEST(LaunchRestartTrainTest, AKilledRankIsRestartedAndTheRunResumesToItsEnd) {
  std::string why;
  auto run = TrainRun::Make("launch_restart_kill", kQuickFaultTransport, &why);
  if (!run) GTEST_SKIP() << why;
  const std::string train = TrainCommand(*run);
  auto launch =
      StartRestartingTraining(*run, "exec " + train + "--set trainer.steps=100000000",
                              "--set trainer.steps=$(cat '" + run->dir() + "/final_steps')");
  ASSERT_TRUE(run->WaitForCheckpoint()) << launch->err();
  ASSERT_TRUE(run->WaitForSteps(5)) << launch->err();
  for (int rank = 0; rank < 3; ++rank) ASSERT_EQ(::kill(run->Pid(rank), SIGSTOP), 0);
  // A checkpoint under way may still complete once they continue: then the run resumes from it.
  const long final_steps = CheckpointStep(run->Checkpoints().back()) + 4;
  WriteFile(run->dir() + "/final_steps", std::to_string(final_steps) + "\n");
  ASSERT_EQ(::kill(run->Pid(1), SIGKILL), 0);
  for (int rank : {0, 2}) ::kill(run->Pid(rank), SIGCONT);
  const int code = WaitForTheEndAfterFault(*launch, std::chrono::steady_clock::now());
  const std::string err = launch->err(), out = launch->out();
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(err.find("reel launch: rank 1 was killed by signal 9 (SIGKILL)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("reel launch: restart 1 of 1: starting the 3 rank(s) again"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("[rank 0] reel train: restart 1 of the launch (REEL_RESTART_COUNT=1): "
                     "resuming from the newest checkpoint in " +
                     run->dir() + "/ckpt"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("[rank 0] resumed from "), std::string::npos) << err;
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(out.find("[rank " + std::to_string(rank) + "] trained " +
                       std::to_string(final_steps) + " steps"),
              std::string::npos)
        << out;
  ASSERT_FALSE(run->Checkpoints().empty());
  EXPECT_EQ(CheckpointStep(run->Checkpoints().back()), final_steps);
}

// Data exactly once across a restart: the first attempt trains 4 of the epoch's 10 steps (3
// ranks, 40 videos and batch 4 each) and writes its checkpoint, then rank 0 is killed (once its
// `reel train` has reported: the other ranks may be stopped while they report theirs); the
// restarted attempt resumes there and ends the epoch having trained each of the 120 videos once
// (a replay from the epoch's start would train 14 steps and 168 examples; the core's reshard
// tests check resumed positions id by id).
TEST(LaunchRestartTrainTest, ARestartedRunTrainsEveryExampleOfTheEpochOnce) {
  std::string why;
  auto run = TrainRun::Make("launch_restart_once", kQuickFaultTransport, &why);
  if (!run) GTEST_SKIP() << why;
  const std::string train = TrainCommand(*run);
  auto launch =
      StartRestartingTraining(*run,
                              train +
                                  "--set trainer.steps=4 || exit $?; if [ $REEL_RANK = 0 ]; then "
                                  "kill -9 $$; fi",
                              "--set trainer.epochs=1");
  const int code = WaitForTheEndAfterFault(*launch, std::chrono::steady_clock::now());
  const std::string err = launch->err(), out = launch->out();
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(err.find("reel launch: rank 0 was killed by signal 9 (SIGKILL)"), std::string::npos)
      << err;
  EXPECT_NE(out.find("[rank 0] trained 4 steps (48 examples, epoch 0)"), std::string::npos) << out;
  EXPECT_NE(err.find("[rank 0] resumed from " + run->dir() + "/ckpt/ckpt-0000000004.reelckpt"),
            std::string::npos)
      << err;
  EXPECT_NE(out.find("[rank 0] trained 10 steps (120 examples, epoch 1)"), std::string::npos)
      << out;
  ASSERT_FALSE(run->Checkpoints().empty());
  EXPECT_EQ(CheckpointStep(run->Checkpoints().back()), 10);
}

// Two nodes of one rank each (two launchers on this machine, sharing secret, job identity and
// coordinator as nodes do), under --max-restarts 1, node 1's rank SIGKILLed mid-training (both
// held stopped while the newest checkpoint is read). Node 1's launcher restarts its rank at once;
// node 0's rank fails naming the lost rank (exit 75) and its launcher restarts it too; the
// restarted rank 1 may first reach node 0's old rank 0 and waits it out; the group forms again at
// the coordinator as attempt 1 and trains to the budget. Both launches exit 0.
TEST(LaunchRestartTrainTest, OnTwoNodesBothLaunchersRestartAndTheGroupFormsAgain) {
  std::string why;
  auto run = TrainRun::Make("launch_restart_nodes", kQuickFaultTransport, &why);
  if (!run) GTEST_SKIP() << why;
  const std::string coordinator = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  ::setenv("REEL_SECRET", "restart-nodes-test-secret", 1);
  ::setenv("REEL_JOB_ID", "restart-nodes-test", 1);
  std::vector<std::unique_ptr<Background>> nodes;
  for (int node : {0, 1}) {
    const std::string out = run->dir() + "/node" + std::to_string(node);
    fs::create_directories(out);
    nodes.push_back(StartRestartingTraining(
        *run, "exec " + TrainCommand(*run) + "--set trainer.steps=100000000",
        "--set trainer.steps=$(cat '" + run->dir() + "/final_steps')",
        {"-n", "1", "--nnodes", "2", "--node-rank", std::to_string(node), "--coordinator",
         coordinator},
        out));
  }
  ::unsetenv("REEL_SECRET");
  ::unsetenv("REEL_JOB_ID");
  ASSERT_TRUE(run->WaitForCheckpoint()) << nodes[0]->err() << nodes[1]->err();
  ASSERT_TRUE(run->WaitForSteps(5)) << nodes[0]->err();
  for (int rank : {0, 1}) ASSERT_EQ(::kill(run->Pid(rank), SIGSTOP), 0);
  const long final_steps = CheckpointStep(run->Checkpoints().back()) + 4;
  WriteFile(run->dir() + "/final_steps", std::to_string(final_steps) + "\n");
  ASSERT_EQ(::kill(run->Pid(1), SIGKILL), 0);
  ::kill(run->Pid(0), SIGCONT);
  const auto fault = std::chrono::steady_clock::now();
  const int code1 = WaitForTheEndAfterFault(*nodes[1], fault);
  const int code0 = WaitForTheEndAfterFault(*nodes[0], fault);
  const std::string err0 = nodes[0]->err(), err1 = nodes[1]->err();
  EXPECT_EQ(code0, 0) << err0;
  EXPECT_EQ(code1, 0) << err1;
  EXPECT_NE(err1.find("reel launch: rank 1 was killed by signal 9 (SIGKILL)"), std::string::npos)
      << err1;
  EXPECT_NE(err0.find("reel launch: rank 0 exited with status 75"), std::string::npos) << err0;
  for (const std::string* err : {&err0, &err1})
    EXPECT_NE(err->find("reel launch: restart 1 of 1: starting the 1 rank(s) again"),
              std::string::npos)
        << *err;
  EXPECT_NE(err0.find("[rank 0] resumed from "), std::string::npos) << err0;
  EXPECT_NE(nodes[0]->out().find("[rank 0] trained " + std::to_string(final_steps) + " steps"),
            std::string::npos)
      << nodes[0]->out();
  EXPECT_NE(nodes[1]->out().find("[rank 1] trained " + std::to_string(final_steps) + " steps"),
            std::string::npos)
      << nodes[1]->out();
  EXPECT_EQ(CheckpointStep(run->Checkpoints().back()), final_steps);
}

}  // namespace
}  // namespace reel::e2e
