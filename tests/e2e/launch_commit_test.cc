// In-memory commits (trainer.commit_every_steps; docs/distributed.md, "In-memory commits"): a
// rank killed between two checkpoints on disk is restarted from the newer commit, retraining
// fewer steps and every example of the epoch once; a checkpoint on disk newer than the commits
// wins; a corrupt commit is refused, named, and the next newest state taken; another job's commit
// is never read; a run that ends well leaves none; bad values are refused before training.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

// The commit files in `dir` (not temporary ones).
std::vector<std::string> CommitFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("reel-commit.", 0) == 0 && name.find(".tmp") == std::string::npos)
      out.push_back(e.path().string());
  }
  return out;
}

// Waits (generously; not a timing assertion) until `dir` holds a commit.
bool WaitForACommit(const std::string& dir) {
  for (int i = 0; i < 3000; ++i) {
    if (!CommitFilesIn(dir).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The steps of the metrics log, in the order written (one line per step).
std::vector<long> LoggedSteps(const std::string& metrics) {
  std::vector<long> out;
  static const std::regex kStep("\"step\": ?([0-9]+)");
  for (const std::string& line : Lines(ReadFile(metrics))) {
    std::smatch m;
    if (std::regex_search(line, m, kStep)) out.push_back(std::stol(m[1]));
  }
  return out;
}

// The step after "at step " in the first line of `err` holding `what`; -1 if none.
long StepAfter(const std::string& err, const std::string& what) {
  const size_t at = err.find(what);
  if (at == std::string::npos) return -1;
  const size_t step = err.find(" at step ", at);
  return step == std::string::npos ? -1 : std::stol(err.substr(step + 9));
}

// `reel train` of `run` alone (one process), committing every step into `commits`.
std::vector<std::string> CommittingTrain(const TrainRun& run, const std::string& commits,
                                         std::vector<std::string> more) {
  std::vector<std::string> args = {"train",
                                   "--config",
                                   run.config(),
                                   "--set",
                                   "trainer.commit_every_steps=1",
                                   "--set",
                                   "trainer.commit_dir=" + commits,
                                   "--set",
                                   "trainer.keep_checkpoints=0"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// A process killed mid-run leaves its commit (and no checkpoint: none is due); a resume takes it,
// trains on and removes it at the end. Then the commit of that kill, put back: older than the
// checkpoint the resume wrote, it is passed over; a commit newer than the checkpoints but corrupt
// is refused naming it, and the checkpoint taken. Another job's commit, newer than everything, is
// never read, nor removed; its own job started afresh removes it.
TEST(LaunchCommitTest, TheNewestOfCommitsAndCheckpointsIsTakenAndBadOrForeignCommitsAreNot) {
  std::string why;
  auto run = TrainRun::Make("launch_commit_single", "", &why);
  if (!run) GTEST_SKIP() << why;
  const std::string commits = run->dir() + "/shm", saved = run->dir() + "/saved-commit";
  ::setenv("REEL_JOB_ID", "commit-test-a", 1);
  {
    Background first(run->dir(), CommittingTrain(*run, commits,
                                                 {"--set", "trainer.steps=100000000", "--set",
                                                  "trainer.checkpoint_every_steps=100000000"}));
    ASSERT_TRUE(first.started());
    ASSERT_TRUE(WaitForACommit(commits)) << first.err();
    first.Signal(SIGKILL);
    EXPECT_EQ(first.Wait(), 128 + SIGKILL);
  }
  ASSERT_EQ(CommitFilesIn(commits).size(), 1u);
  const std::string commit = CommitFilesIn(commits)[0];
  fs::copy_file(commit, saved);
  EXPECT_TRUE(run->Checkpoints().empty());

  // The commit is of the last step logged or the one before (a step is logged, then committed).
  const long logged = LoggedSteps(run->dir() + "/metrics.jsonl").back();

  // Resumed from the commit, to 3 steps past the last logged.
  RunResult r = Reel(CommittingTrain(
      *run, commits, {"--resume", "--set", "trainer.steps=" + std::to_string(logged + 3)}));
  EXPECT_EQ(r.code, 0) << r.err;
  const long c = StepAfter(r.err, "resumed from commit " + commit + " (rank 0's)");
  EXPECT_TRUE(c == logged || c == logged - 1) << "logged " << logged << "\n" << r.err;
  EXPECT_NE(r.err.find("resume: the commit of step " + std::to_string(c) +
                       " is newer than any checkpoint"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(CommitFilesIn(commits).empty()) << "the commits outlived a run that ended well";
  ASSERT_FALSE(run->Checkpoints().empty());
  const long disk = CheckpointStep(run->Checkpoints().back());
  EXPECT_GT(disk, c);

  // The old commit back: the checkpoint is newer, and is taken.
  fs::copy_file(saved, commit);
  r = Reel(CommittingTrain(*run, commits,
                           {"--resume", "--set", "trainer.steps=" + std::to_string(disk + 1)}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(StepAfter(r.err, "resumed from " + run->dir() + "/ckpt/"), disk) << r.err;
  EXPECT_EQ(r.err.find("resumed from commit"), std::string::npos) << r.err;
  EXPECT_TRUE(CommitFilesIn(commits).empty());

  // A corrupt commit newer than the disk: refused, named; the checkpoint is taken. (The checkpoint
  // of step disk + 1, moved to the commit's name: a commit is encoded as a checkpoint is.)
  const std::string newest = run->Checkpoints().back();
  ASSERT_EQ(CheckpointStep(newest), disk + 1);
  std::string bytes = ReadFile(newest);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
  WriteFile(commit, bytes);
  fs::remove(newest);
  r = Reel(CommittingTrain(*run, commits,
                           {"--resume", "--set", "trainer.steps=" + std::to_string(disk + 2)}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("resume: refused a commit that does not decode (DATA_LOSS: " + commit +
                       ": checkpoint checksum mismatch"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(StepAfter(r.err, "resumed from " + run->dir() + "/ckpt/"), disk) << r.err;

  // Another job's commit (the one saved, of job a) is not read by job b, nor removed by it.
  fs::copy_file(saved, commit, fs::copy_options::overwrite_existing);
  fs::remove_all(run->dir() + "/ckpt");
  ::setenv("REEL_JOB_ID", "commit-test-b", 1);
  r = Reel(CommittingTrain(*run, commits, {"--resume", "--set", "trainer.steps=1"}));
  ::unsetenv("REEL_JOB_ID");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("starting from scratch"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("resumed from"), std::string::npos) << r.err;
  EXPECT_EQ(CommitFilesIn(commits), std::vector<std::string>{commit});

  // Job a started afresh (no --resume) removes job a's commit before its first step, so that a
  // restart of it could not take the earlier run's state; it is killed long before a commit of its
  // own is due.
  ::setenv("REEL_JOB_ID", "commit-test-a", 1);
  Background fresh(run->dir(), CommittingTrain(*run, commits,
                                               {"--set", "trainer.steps=100000000", "--set",
                                                "trainer.commit_every_steps=100000000"}));
  ::unsetenv("REEL_JOB_ID");
  ASSERT_TRUE(fresh.started());
  bool gone = false;
  for (int i = 0; i < 3000 && !gone; ++i) {  // generously; not a timing assertion
    gone = !fs::exists(commit);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fresh.Signal(SIGKILL);
  EXPECT_EQ(fresh.Wait(), 128 + SIGKILL);
  EXPECT_TRUE(gone) << "a fresh start kept its job's earlier commit";
}

// Refused before anything is trained: a negative cadence, one that is not a whole number,
// commits without a checkpoint directory, and commits of ranks that do not step together.
TEST(LaunchCommitTest, BadCommitSettingsAreRefusedBeforeTraining) {
  std::string why;
  auto run = TrainRun::Make("launch_commit_bad", "", &why);
  if (!run) GTEST_SKIP() << why;
  const std::string commits = run->dir() + "/shm";
  RunResult r = Reel(CommittingTrain(
      *run, commits, {"--set", "trainer.commit_every_steps=-2", "--set", "trainer.steps=2"}));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("trainer: commit_every_steps must be >= 0 (0: no commits), got -2"),
            std::string::npos)
      << r.err;
  r = Reel(CommittingTrain(
      *run, commits, {"--set", "trainer.commit_every_steps=1.5", "--set", "trainer.steps=2"}));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("--set trainer.commit_every_steps=1.5: '1.5' is not an integer"),
            std::string::npos)
      << r.err;
  r = Reel(CommittingTrain(*run, commits,
                           {"--set", "trainer.checkpoint_dir=", "--set", "trainer.steps=2"}));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("trainer: commit_every_steps needs trainer.checkpoint_dir"),
            std::string::npos)
      << r.err;
  // Ranks that do not step together (async_sgd's), when that plugin is built.
  if (fs::exists(fs::path(REEL_EXE).parent_path().parent_path() /
                 "lib/reel/plugins/libreel_async_sgd.so")) {
    r = Reel(CommittingTrain(*run, commits,
                             {"--set", "optimizer.name=async_sgd", "--set", "trainer.local_ranks=2",
                              "--set", "trainer.steps=2"}));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("trainer: commit_every_steps needs ranks that step together; this "
                         "optimizer's ranks do not"),
              std::string::npos)
        << r.err;
  }
  EXPECT_TRUE(run->Checkpoints().empty());
  EXPECT_FALSE(fs::exists(commits));
  EXPECT_FALSE(fs::exists(run->dir() + "/metrics.jsonl")) << "trained with a bad setting";
}

// Three ranks under `reel launch --max-restarts 1`, committing every 2 steps after a checkpoint of
// step 2 on disk (none later is due); rank 1 SIGKILLed mid-run (all held stopped meanwhile). The
// restarted ranks take the newest commit, not the checkpoint: the run log shows at most 2 steps
// trained again where the checkpoint would have cost every step since step 2. The restarted
// attempt trains to the end of an epoch and has trained each example of every epoch once: 10
// steps and 120 examples an epoch (3 ranks, 40 videos and batch 4 each).
TEST(LaunchCommitTrainTest, AKilledRankIsRestartedFromTheCommitAndEveryExampleTrainedOnce) {
  std::string why;
  auto run = TrainRun::Make("launch_commit_kill", kQuickFaultTransport, &why);
  if (!run) GTEST_SKIP() << why;
  const std::string commits = run->dir() + "/shm";
  ::setenv("REEL_JOB_ID", "commit-test-kill", 1);
  const std::string train = std::string("'") + REEL_EXE + "' train --config '" + run->config() +
                            "' --set trainer.commit_every_steps=2 --set trainer.commit_dir='" +
                            commits + "' --set trainer.keep_checkpoints=0 ";
  // The checkpoint of step 2 (no commit is left: that run ended well).
  RunResult r = Reel({"launch", "-n", "3", "--", "sh", "-c", train + "--set trainer.steps=2"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(run->Checkpoints().size(), 1u);
  EXPECT_TRUE(CommitFilesIn(commits).empty());
  Background launch(
      run->dir(),
      {"launch", "-n", "3", "--max-restarts", "1", "--grace-seconds", "10", "--", "sh", "-c",
       "echo $$ > '" + run->dir() + "/pid.'$REEL_RANK; if [ $REEL_RESTART_COUNT = 0 ]; then exec " +
           train +
           "--resume --set trainer.steps=100000000 --set trainer.checkpoint_every_steps=100000000; "
           "else exec " +
           train + "--set trainer.steps=0 --set trainer.epochs=$(cat '" + run->dir() +
           "/epochs'); fi"});
  ::unsetenv("REEL_JOB_ID");
  ASSERT_TRUE(launch.started());
  ASSERT_TRUE(run->WaitForSteps(8)) << launch.err();
  ASSERT_TRUE(WaitForACommit(commits)) << launch.err();
  for (int rank = 0; rank < 3; ++rank) ASSERT_EQ(::kill(run->Pid(rank), SIGSTOP), 0);
  const long epochs = LoggedSteps(run->dir() + "/metrics.jsonl").back() / 10 + 2;  // and one more
  WriteFile(run->dir() + "/epochs", std::to_string(epochs) + "\n");
  ASSERT_EQ(::kill(run->Pid(1), SIGKILL), 0);
  for (int rank : {0, 2}) ::kill(run->Pid(rank), SIGCONT);
  const int code = WaitForTheEndAfterFault(launch, std::chrono::steady_clock::now());
  const std::string err = launch.err(), out = launch.out();
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(err.find("reel launch: rank 1 was killed by signal 9 (SIGKILL)"), std::string::npos)
      << err;
  const long resumed = StepAfter(err, "[rank 0] resumed from commit " + commits + "/reel-commit.");
  ASSERT_GT(resumed, 2) << err;

  // The run log: the pre-run's steps, this launch's first attempt's, then the restart's, whose
  // first line is the last one of step resumed + 1. Before it, the furthest step reached.
  const std::vector<long> steps = LoggedSteps(run->dir() + "/metrics.jsonl");
  const auto first = std::find(steps.rbegin(), steps.rend(), resumed + 1);
  ASSERT_NE(first, steps.rend()) << "the restart logged no step " << resumed + 1;
  ASSERT_NE(first + 1, steps.rend());
  const long reached = *(first + 1);
  const long retrained = reached - resumed;
  std::cout << "reached step " << reached << ", resumed from the commit of step " << resumed
            << "\n";
  EXPECT_LE(retrained, 2) << "reached " << reached << ", resumed at " << resumed;
  EXPECT_LT(retrained, reached - 2) << "the checkpoint of step 2 would have cost as much";

  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(out.find("[rank " + std::to_string(rank) + "] trained " +
                       std::to_string(10 * epochs) + " steps (" + std::to_string(120 * epochs) +
                       " examples, epoch " + std::to_string(epochs) + ")"),
              std::string::npos)
        << out;
  EXPECT_TRUE(CommitFilesIn(commits).empty()) << "the commits outlived a run that ended well";
}

// At another size: three ranks committing every 2 steps, rank 1 SIGKILLed mid-run, no restart
// (the launch fails); `reel launch -n 2 ... --resume` of the same job takes the commit, reshards
// the three ranks' positions over two and ends its epochs having trained each of the 120 videos
// once an epoch; it leaves no commit, the lost third rank's included.
TEST(LaunchCommitTrainTest, ACommitResumedOnFewerRanksTrainsEveryExampleOnce) {
  std::string why;
  auto run = TrainRun::Make("launch_commit_size", kQuickFaultTransport, &why);
  if (!run) GTEST_SKIP() << why;
  const std::string commits = run->dir() + "/shm";
  ::setenv("REEL_JOB_ID", "commit-test-size", 1);
  const std::string train = std::string("'") + REEL_EXE + "' train --config '" + run->config() +
                            "' --set trainer.commit_every_steps=2 --set trainer.commit_dir='" +
                            commits + "' --set trainer.keep_checkpoints=0 ";
  {
    Background launch(run->dir(), {"launch", "-n", "3", "--grace-seconds", "10", "--", "sh", "-c",
                                   "echo $$ > '" + run->dir() + "/pid.'$REEL_RANK; exec " + train +
                                       "--set trainer.steps=100000000"});
    ASSERT_TRUE(launch.started());
    ASSERT_TRUE(run->WaitForSteps(5)) << launch.err();
    ASSERT_TRUE(WaitForACommit(commits)) << launch.err();
    for (int rank = 0; rank < 3; ++rank) ASSERT_EQ(::kill(run->Pid(rank), SIGSTOP), 0);
    const long epochs = LoggedSteps(run->dir() + "/metrics.jsonl").back() / 10 + 2;
    WriteFile(run->dir() + "/epochs", std::to_string(epochs) + "\n");
    ASSERT_EQ(::kill(run->Pid(1), SIGKILL), 0);
    for (int rank : {0, 2}) ::kill(run->Pid(rank), SIGCONT);
    EXPECT_NE(WaitForTheEndAfterFault(launch, std::chrono::steady_clock::now()), 0);
  }
  EXPECT_TRUE(run->Checkpoints().empty());
  const long epochs = std::stol(ReadFile(run->dir() + "/epochs"));
  RunResult r = Reel(
      {"launch", "-n", "2", "--", "sh", "-c",
       train + "--resume --set trainer.steps=0 --set trainer.epochs=" + std::to_string(epochs)});
  ::unsetenv("REEL_JOB_ID");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GT(StepAfter(r.err, "[rank 0] resumed from commit " + commits + "/reel-commit."), 0)
      << r.err;
  const std::string once = " steps (" + std::to_string(120 * epochs) + " examples, epoch " +
                           std::to_string(epochs) + ")";
  for (int rank = 0; rank < 2; ++rank) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] trained ";
    int said = 0;
    for (const std::string& line : Lines(r.out))
      if (line.rfind(prefix, 0) == 0) {
        ++said;
        EXPECT_EQ(line.substr(line.find(" steps ("), once.size()), once) << line;
      }
    EXPECT_EQ(said, 1) << r.out;
  }
  EXPECT_TRUE(CommitFilesIn(commits).empty()) << "the commits outlived a run that ended well";
}

}  // namespace
}  // namespace reel::e2e
