// `reel launch` end to end: the environment of each rank, prefixed output, a failing rank stops
// the others and is named, signals reach every rank, and bad arguments are refused clearly.
// The ranks are small shell scripts, so these tests need no transport.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

TEST(LaunchTest, EveryRankGetsItsEnvironment) {
  RunResult r =
      LaunchSh({"-n", "3"},
               "echo $REEL_RANK $REEL_WORLD_SIZE $REEL_LOCAL_RANK "
               "$REEL_LOCAL_WORLD_SIZE $REEL_NODE_RANK $REEL_TRANSPORT $REEL_COORDINATOR");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  std::sort(lines.begin(), lines.end());
  std::set<std::string> coordinators;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string want = "[rank " + std::to_string(rank) + "] " + std::to_string(rank) + " 3 " +
                             std::to_string(rank) + " 3 0 tcp 127.0.0.1:";
    ASSERT_EQ(lines[rank].substr(0, want.size()), want) << r.out;
    const std::string port = lines[rank].substr(want.size());
    ASSERT_FALSE(port.empty());
    EXPECT_GT(std::stoi(port), 0) << lines[rank];
    coordinators.insert(port);
  }
  EXPECT_EQ(coordinators.size(), 1u) << "every rank must meet at the same coordinator: " << r.out;
}

TEST(LaunchTest, SecondNodeNumbersItsRanksAfterTheFirstNodes) {
  ::setenv("REEL_SECRET", "shared-by-every-node", 1);
  ::setenv("REEL_JOB_ID", "run-1", 1);
  RunResult r =
      LaunchSh({"-n", "2", "--nnodes", "3", "--node-rank", "2", "--coordinator", "10.1.2.3:29500"},
               "echo $REEL_RANK $REEL_WORLD_SIZE $REEL_LOCAL_RANK $REEL_NODE_RANK "
               "$REEL_COORDINATOR");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  std::sort(lines.begin(), lines.end());
  ::unsetenv("REEL_SECRET");
  ::unsetenv("REEL_JOB_ID");
  EXPECT_EQ(lines, (std::vector<std::string>{"[rank 4] 4 6 0 2 10.1.2.3:29500",
                                             "[rank 5] 5 6 1 2 10.1.2.3:29500"}));
}

// Across nodes a secret made by one launcher cannot reach the others: without REEL_SECRET the
// launch is refused before any rank starts (no rank may run and fail at formation).
TEST(LaunchTest, SeveralNodesWithoutASecretAreRefusedBeforeAnyRankStarts) {
  ::unsetenv("REEL_SECRET");
  const std::string marker = ScratchDir("launch_no_secret") + "/started";
  RunResult r = Reel({"launch", "-n", "2", "--nnodes", "2", "--coordinator", "127.0.0.1:29500",
                      "--", "sh", "-c", "touch " + marker});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("REEL_SECRET is not set: ranks on 2 nodes must share one"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("openssl rand -hex 32"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(marker)) << "a rank was started";
  // mpi ranks do not use the secret.
  ::setenv("REEL_TRANSPORT", "mpi", 1);
  RunResult mpi = Reel({"launch", "-n", "1", "--nnodes", "2", "--coordinator", "127.0.0.1:29500",
                        "--", "sh", "-c", "touch " + marker});
  ::unsetenv("REEL_TRANSPORT");
  EXPECT_EQ(mpi.code, 0) << mpi.err;
  EXPECT_TRUE(fs::exists(marker));
}

// On one node the ranks share a secret made for this launch; one from the environment wins.
TEST(LaunchTest, RanksShareASecret) {
  ::unsetenv("REEL_SECRET");
  RunResult r = LaunchSh({"-n", "2"}, "echo $REEL_SECRET");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const std::string secret = lines[0].substr(lines[0].find("] ") + 2);
  EXPECT_EQ(secret.size(), 64u) << r.out;
  EXPECT_EQ(lines[1].substr(lines[1].find("] ") + 2), secret);
  RunResult again = LaunchSh({"-n", "1"}, "echo $REEL_SECRET");
  EXPECT_NE(again.out, "[rank 0] " + secret + "\n") << "a new secret for every launch";
  ::setenv("REEL_SECRET", "given", 1);
  r = LaunchSh({"-n", "1"}, "echo $REEL_SECRET");
  ::unsetenv("REEL_SECRET");
  EXPECT_EQ(r.out, "[rank 0] given\n");
}

// Every rank of a launch carries one job identity, by which the tcp transport refuses processes
// of other launches: new for every launch on one node, the environment's (REEL_JOB_ID, else
// Slurm's) when set, and required across nodes, where one made here could not reach the others.
TEST(LaunchTest, RanksShareAJobIdentityNewForEachLaunch) {
  ::unsetenv("REEL_JOB_ID");
  RunResult r = LaunchSh({"-n", "2"}, "echo $REEL_JOB_ID");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const std::string id = lines[0].substr(lines[0].find("] ") + 2);
  EXPECT_EQ(id.rfind("launch-", 0), 0u) << r.out;
  EXPECT_EQ(lines[1].substr(lines[1].find("] ") + 2), id);
  RunResult again = LaunchSh({"-n", "1"}, "echo $REEL_JOB_ID");
  EXPECT_NE(again.out, "[rank 0] " + id + "\n") << "a new identity for every launch";
  ::setenv("SLURM_JOB_ID", "77", 1);
  r = LaunchSh({"-n", "1"}, "echo $REEL_JOB_ID");
  EXPECT_EQ(r.out, "[rank 0] 77\n") << r.err;
  ::setenv("REEL_JOB_ID", "given", 1);
  r = LaunchSh({"-n", "1"}, "echo $REEL_JOB_ID");
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_EQ(r.out, "[rank 0] given\n") << r.err;
  ::setenv("REEL_JOB_ID", "two words", 1);
  r = Reel({"launch", "-n", "1", "--", "true"});
  ::unsetenv("REEL_JOB_ID");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("REEL_JOB_ID=\"two words\" is not a job identity"), std::string::npos)
      << r.err;
}

TEST(LaunchTest, SeveralNodesWithoutAJobIdentityAreRefusedBeforeAnyRankStarts) {
  ::setenv("REEL_SECRET", "shared-by-every-node", 1);
  ::unsetenv("REEL_JOB_ID");
  const std::string marker = ScratchDir("launch_no_job_id") + "/started";
  RunResult r = Reel({"launch", "-n", "1", "--nnodes", "2", "--coordinator", "127.0.0.1:29500",
                      "--", "sh", "-c", "touch " + marker});
  ::unsetenv("REEL_SECRET");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("REEL_JOB_ID is not set: ranks on 2 nodes must share one job identity"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(marker)) << "a rank was started";
}

TEST(LaunchTest, TransportFromTheEnvironmentWins) {
  ::setenv("REEL_TRANSPORT", "mpi", 1);
  RunResult r = LaunchSh({"-n", "1"}, "echo $REEL_TRANSPORT");
  ::unsetenv("REEL_TRANSPORT");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[rank 0] mpi\n");
}

// Many lines from every rank on both streams at once: each line arrives whole, with its rank's
// prefix, and none is lost; a last line without a newline is still delivered.
TEST(LaunchTest, PrefixesEveryWholeLine) {
  const std::string payload(300, 'x');
  RunResult r =
      LaunchSh({"-n", "3"}, "i=0; while [ $i -lt 300 ]; do echo \"out $REEL_RANK $i " + payload +
                                "\"; echo \"err $REEL_RANK $i\" >&2; i=$((i+1)); done; "
                                "printf 'tail %s' $REEL_RANK");
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<int, int> next_out, next_err;
  std::set<int> tails;
  for (const std::string& line : Lines(r.out)) {
    int rank = -1, i = -1;
    char rest[512] = {0};
    if (std::sscanf(line.c_str(), "[rank %d] tail %d", &rank, &i) == 2) {
      EXPECT_EQ(rank, i) << line;
      tails.insert(rank);
      continue;
    }
    ASSERT_EQ(std::sscanf(line.c_str(), "[rank %d] out %*d %d %511s", &rank, &i, rest), 3) << line;
    EXPECT_EQ(line, "[rank " + std::to_string(rank) + "] out " + std::to_string(rank) + " " +
                        std::to_string(i) + " " + payload);
    EXPECT_EQ(i, next_out[rank]++) << "lines of rank " << rank << " out of order";
  }
  for (const std::string& line : Lines(r.err)) {
    int rank = -1, i = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "[rank %d] err %*d %d", &rank, &i), 2) << line;
    EXPECT_EQ(line, "[rank " + std::to_string(rank) + "] err " + std::to_string(rank) + " " +
                        std::to_string(i));
    EXPECT_EQ(i, next_err[rank]++);
  }
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(next_out[rank], 300) << "rank " << rank;
    EXPECT_EQ(next_err[rank], 300) << "rank " << rank;
  }
  EXPECT_EQ(tails, (std::set<int>{0, 1, 2}));
}

// Rank 1 fails while the others sleep: launch stops them, exits with rank 1's status and says
// which rank failed and how.
TEST(LaunchTest, FailingRankStopsTheOthersAndIsNamed) {
  const std::string dir = ScratchDir("launch_fail");
  RunResult r = LaunchSh({"-n", "3"}, "echo $$ > " + dir +
                                          "/pid.$REEL_RANK; if [ $REEL_RANK = 1 ]; then "
                                          "while [ ! -e " +
                                          dir + "/pid.0 ] || [ ! -e " + dir +
                                          "/pid.2 ]; do sleep 0.05; done; exit 3; fi; "
                                          "exec sleep 1000");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("reel launch: rank 1 exited with status 3; stopping the other 2 rank(s)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("reel launch: UNAVAILABLE: rank 1 exited with status 3"), std::string::npos)
      << r.err;
  for (int rank : {0, 2}) {
    const pid_t pid = std::stoi(ReadFile(dir + "/pid." + std::to_string(rank)));
    EXPECT_NE(::kill(pid, 0), 0) << "rank " << rank << " (pid " << pid << ") still runs";
  }
  fs::remove_all(dir);
}

// --keep-going tolerates ranks other than 0 (an async_sgd worker, a tune worker) but not rank 0:
// rank 0 fails, rank 1 fails just after it (so usually while rank 0's exit still settles) and is
// the last to exit; the launch still fails with rank 0's status and lists the tolerated rank.
TEST(LaunchTest, KeepGoingToleratesOtherRanksButNotRankZero) {
  const std::string dir = ScratchDir("launch_keep_going");
  RunResult r = LaunchSh({"-n", "2", "--keep-going"},
                         "if [ $REEL_RANK = 0 ]; then touch " + dir + "/zero; exit 4; fi; " +
                             "while [ ! -e " + dir + "/zero ]; do sleep 0.01; done; exit 5");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("reel launch: UNAVAILABLE: rank 0 exited with status 4"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1 rank(s) failed and were tolerated (--keep-going): rank 1 exited with "
                       "status 5"),
            std::string::npos)
      << r.err;
  fs::remove_all(dir);
}

TEST(LaunchTest, RankKilledBySignalIsNamedWithTheSignal) {
  RunResult r =
      LaunchSh({"-n", "2"}, "if [ $REEL_RANK = 0 ]; then kill -9 $$; fi; exec sleep 1000");
  EXPECT_EQ(r.code, 128 + 9) << r.err;
  EXPECT_NE(r.err.find("rank 0 was killed by signal 9 (SIGKILL)"), std::string::npos) << r.err;
}

// Rank 1 stops itself (SIGSTOP) and rank 0 then fails: launch names the stopped rank beside the
// failed one, and continues it after SIGTERM so it ends at once (its TERM trap runs), without
// waiting out the grace period.
TEST(LaunchTest, StoppedRankIsNamedWhenAnotherFailsAndIsLetRunToEnd) {
  const std::string dir = ScratchDir("launch_stop");
  RunResult r =
      LaunchSh({"-n", "2", "--grace-seconds", "600"},
               "if [ $REEL_RANK = 1 ]; then trap 'echo got TERM; exit 7' TERM; echo $$ > " + dir +
                   "/pid.1; kill -STOP $$; echo continued before TERM; exit 9; fi; "
                   "while [ ! -e " +
                   dir + "/pid.1 ] || ! grep -q '^[0-9]* ([^)]*) T' /proc/$(cat " + dir +
                   "/pid.1)/stat 2>/dev/null; do sleep 0.05; done; exit 3");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("reel launch: rank 1 was stopped by signal 19 (SIGSTOP)\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("reel launch: rank 0 exited with status 3 while rank 1 was stopped by "
                       "signal 19 (SIGSTOP); stopping the other 1 rank(s)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("reel launch: UNAVAILABLE: rank 0 exited with status 3 while rank 1 was "
                       "stopped by signal 19 (SIGSTOP)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("grace period over"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "[rank 1] got TERM\n");
  fs::remove_all(dir);
}

// A rank still stopped when every other rank has ended would wait forever (an async_sgd server
// stopped while its workers gave up on it, a worker stopped while the others finished): launch
// names it and ends it (SIGTERM, and SIGCONT so its trap runs at once). It fails the launch
// (128 + SIGSTOP, as a shell reports a stopped job) unless --keep-going tolerates it (a rank
// other than 0). The rank at `stops` stops itself; the other waits for that, then exits `other`.
TEST(LaunchTest, RankStoppedWhenTheOthersEndedIsEndedAndNamed) {
  struct Case {
    bool keep_going;
    int stops, other, code;
  };
  for (const Case& c :
       {Case{false, 1, 0, 128 + SIGSTOP}, Case{true, 1, 0, 0}, Case{true, 0, 5, 128 + SIGSTOP}}) {
    SCOPED_TRACE("keep_going " + std::to_string(c.keep_going) + ", rank " +
                 std::to_string(c.stops) + " stops");
    const std::string dir = ScratchDir("launch_stranded");
    const std::string pid = dir + "/pid", s = std::to_string(c.stops);
    std::vector<std::string> flags = {"-n", "2", "--grace-seconds", "600"};
    if (c.keep_going) flags.push_back("--keep-going");
    RunResult r = LaunchSh(
        flags, "if [ $REEL_RANK = " + s + " ]; then trap 'echo got TERM; exit 7' TERM; echo $$ > " +
                   pid + "; kill -STOP $$; echo continued before TERM; exit 9; fi; while [ ! -e " +
                   pid + " ] || ! grep -q '^[0-9]* ([^)]*) T' /proc/$(cat " + pid +
                   ")/stat 2>/dev/null; do sleep 0.05; done; exit " + std::to_string(c.other));
    EXPECT_EQ(r.code, c.code) << r.err;
    const std::string stranded =
        "rank " + s + " was stopped by signal 19 (SIGSTOP) and every other rank ended without it";
    EXPECT_NE(r.err.find("reel launch: " + stranded +
                         "; ending it (SIGTERM, then SIGKILL after 600.0 s)\n"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(c.code == 0 ? "reel launch: tolerated (--keep-going): " + stranded + "\n"
                                     : "reel launch: UNAVAILABLE: " + stranded + "\n"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "[rank " + s + "] got TERM\n");
    fs::remove_all(dir);
  }
}

// A rank that ignores SIGTERM is killed once the grace period is over.
TEST(LaunchTest, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  RunResult r = LaunchSh({"-n", "2", "--grace-seconds", "0.2"},
                         "trap '' TERM; if [ $REEL_RANK = 1 ]; then sleep 0.2; exit 4; fi; "
                         "while :; do sleep 0.05; done");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("grace period over; SIGKILL to 1 rank(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 exited with status 4"), std::string::npos) << r.err;
}

// SIGINT (and SIGTERM) to launch reach every rank once; launch waits for all of them and exits
// with 130, as every interrupted reel command does, even though the ranks end with their own
// status.
TEST(LaunchTest, SignalsAreForwardedToEveryRank) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string dir = ScratchDir("launch_sig" + std::to_string(sig));
    const std::string name = sig == SIGINT ? "INT" : "TERM";
    Background launch(dir, {"launch", "-n", "3", "--", "sh", "-c",
                            "trap 'echo got " + name + "; exit 5' " + name +
                                "; echo ready; while :; do sleep 0.05; done"});
    ASSERT_TRUE(launch.started());
    ASSERT_TRUE(launch.WaitForLines(3)) << launch.out() << launch.err();
    launch.Signal(sig);
    EXPECT_EQ(launch.Wait(), 130) << launch.err();
    std::vector<std::string> lines = Lines(launch.out());
    std::sort(lines.begin(), lines.end());
    EXPECT_EQ(lines, (std::vector<std::string>{"[rank 0] got " + name, "[rank 0] ready",
                                               "[rank 1] got " + name, "[rank 1] ready",
                                               "[rank 2] got " + name, "[rank 2] ready"}));
    EXPECT_NE(launch.err().find("got SIG" + name + "; passing it to 3 rank(s)"), std::string::npos)
        << launch.err();
    fs::remove_all(dir);
  }
}

// `reel` as the command is this very executable, whatever PATH says.
TEST(LaunchTest, ReelAsTheCommandIsThisExecutable) {
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", "/nonexistent", 1);
  RunResult r = Reel({"launch", "-n", "2", "--", "reel", "version"});
  ::setenv("PATH", path.c_str(), 1);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_FALSE(lines.empty());
  for (const std::string& line : lines)
    EXPECT_TRUE(line.rfind("[rank 0] ", 0) == 0 || line.rfind("[rank 1] ", 0) == 0) << line;
  EXPECT_NE(r.out.find("[rank 1] reel "), std::string::npos) << r.out;
}

// `reel launch -- reel train` over the tcp transport, on synthetic video-level data with the
// logistic model. Skipped when this build has no tcp, tfrecord or moe plugin.
class LaunchTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    run_ = TrainRun::Make("launch_train", "", &why);
    if (!run_) GTEST_SKIP() << why;
    dir_ = run_->dir();
  }
  std::unique_ptr<Background> Start(int n, const std::vector<std::string>& extra) {
    return run_->Start(n, extra);
  }
  bool WaitForSteps(size_t steps) const { return run_->WaitForSteps(steps); }
  std::unique_ptr<TrainRun> run_;
  std::string dir_;
};

TEST_F(LaunchTrainTest, TwoRanksTrainOverTcpAndWriteOneCheckpoint) {
  RunResult r = Reel({"launch", "-n", "2", "--", "reel", "train", "--config", dir_ + "/run.pbtxt",
                      "--set", "trainer.steps=4"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Both ranks report the same run: 4 steps of 2 x 4 examples.
  ExpectEveryRankSaid(r.out, 2, "trained 4 steps (32 examples");
  EXPECT_EQ(ListDir(dir_ + "/ckpt"),
            std::vector<std::string>{dir_ + "/ckpt/ckpt-0000000004.reelckpt"});
  // The two processes divide the cores (their first lines, on stderr)
  // (core/src/train/thread_budget.h), unless the user chose.
  for (const char* rank : {"[rank 0] ", "[rank 1] "}) {
    const std::string line = std::string(rank) + "reel: 2 ranks share this process's ";
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("(REEL_LOCAL_WORLD_SIZE=2, 1 in this process)"), std::string::npos);
    } else {
      EXPECT_EQ(r.err.find(line), std::string::npos) << r.err;
    }
  }
}

// kill -9 of one rank mid-run: launch names it and exits with 128 + 9; the survivor reports the
// dead rank as Unavailable.
TEST_F(LaunchTrainTest, KilledRankIsNamedAndTheSurvivorSeesItUnavailable) {
  auto launch = Start(2, {"--set", "trainer.steps=100000000"});
  ASSERT_TRUE(WaitForSteps(3)) << launch->err();
  ::kill(std::stoi(ReadFile(dir_ + "/pid.1")), SIGKILL);
  EXPECT_EQ(launch->Wait(), 128 + 9) << launch->err();
  const std::string err = launch->err();
  EXPECT_NE(err.find("reel launch: rank 1 was killed by signal 9 (SIGKILL)"), std::string::npos)
      << err;
  bool survivor_named_it = false;
  for (const std::string& line : Lines(err))
    if (line.rfind("[rank 0] ", 0) == 0 && line.find("UNAVAILABLE") != std::string::npos &&
        line.find("rank 1") != std::string::npos)
      survivor_named_it = true;
  EXPECT_TRUE(survivor_named_it) << err;
}

// Ctrl-C reaches both ranks: rank 0 writes the run's checkpoint, launch exits 130, and the run
// resumes from it on three ranks.
TEST_F(LaunchTrainTest, SigintCheckpointsAndTheRunResumesOnThreeRanks) {
  auto launch = Start(2, {"--set", "trainer.steps=100000000"});
  ASSERT_TRUE(WaitForSteps(3)) << launch->err();
  launch->Signal(SIGINT);
  EXPECT_EQ(launch->Wait(), 130) << launch->err();
  std::vector<std::string> files = ListDir(dir_ + "/ckpt");
  ASSERT_EQ(files.size(), 1u) << launch->err();
  const long step = std::stol(fs::path(files[0]).filename().string().substr(5, 10));
  EXPECT_GE(step, 3);
  // Rank 1 does not write checkpoints, but the run has one: it says how to go on.
  const std::string said = launch->err();
  EXPECT_NE(said.find("[rank 0] reel train: CANCELLED: interrupted at step " +
                      std::to_string(step) + "; continue with --resume"),
            std::string::npos)
      << said;
  EXPECT_NE(
      said.find("[rank 1] reel train: CANCELLED: interrupted at step " + std::to_string(step) +
                "; the lead rank writes the checkpoint: continue with --resume"),
      std::string::npos)
      << said;
  EXPECT_EQ(said.find("no checkpoint_dir set"), std::string::npos) << said;
  RunResult r = Reel({"launch", "-n", "3", "--", "reel", "train", "--config", dir_ + "/run.pbtxt",
                      "--resume", "--set", "trainer.steps=" + std::to_string(step + 2)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("[rank 0] resumed from " + files[0]), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[rank 2] trained " + std::to_string(step + 2) + " steps"),
            std::string::npos)
      << r.out;
}

// Ranks whose configs differ where they compute together (here the seed, which splits the data
// between them) are refused on every rank before training; the run's checkpoint is untouched.
TEST_F(LaunchTrainTest, RanksWithDifferentConfigsAreRefusedAndNothingIsLost) {
  RunResult first = Reel({"launch", "-n", "2", "--", "reel", "train", "--config",
                          dir_ + "/run.pbtxt", "--set", "trainer.steps=2"});
  ASSERT_EQ(first.code, 0) << first.err;
  const std::vector<std::string> before = ListDir(dir_ + "/ckpt");
  ASSERT_EQ(before.size(), 1u);
  const std::string bytes = ReadFile(before[0]);
  const std::string train = std::string("'") + REEL_EXE + "' train --config '" + dir_ +
                            "/run.pbtxt' --resume --set trainer.steps=4 --set "
                            "trainer.seed=$((7 + REEL_RANK))";
  RunResult r = LaunchSh({"-n", "2"}, "exec " + train);
  EXPECT_NE(r.code, 0);
  ExpectEveryRankSaid(r.err, 2,
                      "reel train: INVALID_ARGUMENT: every rank must use the same trainer.seed "
                      "(rank 0: 7, rank 1: 8): the ranks train one model together");
  EXPECT_EQ(r.out.find("trained"), std::string::npos) << r.out;
  EXPECT_EQ(ListDir(dir_ + "/ckpt"), before);
  EXPECT_EQ(ReadFile(before[0]), bytes);
}

TEST(LaunchTest, BadArgumentsAreRefusedClearly) {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"-n", "0", "--", "true"}, "flag '-n': 0 ranks; give 1 to 4096"},
      {{"-n", "x", "--", "true"}, "flag '--nproc-per-node': 'x' is not an integer"},
      {{"--", "true"}, "flag '-n' (ranks on this node) is required"},
      {{"-n", "2", "true"}, "missing '--' before the command to launch"},
      {{"-n", "2", "--"}, "no command after '--'"},
      {{"-n", "2", "--coordinator", "nohost", "--", "true"},
       "flag '--coordinator': 'nohost' is not HOST:PORT with a port in 1..65535"},
      {{"-n", "2", "--coordinator", "h:70000", "--", "true"},
       "flag '--coordinator': 'h:70000' is not HOST:PORT"},
      {{"-n", "2", "--coordinator", ":80", "--", "true"}, "flag '--coordinator': ':80'"},
      {{"-n", "2", "--coordinator", "h:8x", "--", "true"}, "flag '--coordinator': 'h:8x'"},
      {{"-n", "2", "--nnodes", "2", "--", "true"},
       "flag '--coordinator' (HOST:PORT of node 0, reachable from every node) is required"},
      {{"-n", "2", "--nnodes", "2", "--node-rank", "2", "--coordinator", "h:1", "--", "true"},
       "flag '--node-rank': 2 is not in 0..1"},
      {{"-n", "2", "--grace-seconds", "-1", "--", "true"}, "flag '--grace-seconds': '-1'"},
      {{"-n", "2", "--bogus", "--", "true"}, "unknown flag '--bogus'"},
      {{"-n", "2", "--", "/no/such/program"}, "cannot run '/no/such/program': No such file"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"launch"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunResult r = Reel(args);
    EXPECT_EQ(r.code, 1) << c.error << "\n" << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// `reel demo` under a launcher: one rank of the host writes the data while the others wait for
// it, and every rank trains on the same files. Before, every rank synthesised into the same
// folder and one could fail moving a shard another had moved. Fresh work directories, repeated.
TEST(LaunchDemoTest, EveryRankTrainsOnTheDataOneRankPrepared) {
  for (int ranks : {2, 3}) {
    for (int round = 0; round < 2; ++round) {
      const std::string dir =
          ScratchDir("launch_demo_" + std::to_string(ranks) + "_" + std::to_string(round));
      RunResult r =
          Reel({"launch", "-n", std::to_string(ranks), "--", "reel", "demo", "--workdir", dir,
                "--quiet", "--set", "trainer.steps=4", "--set", "trainer.eval_every_steps=0",
                "--set", "trainer.checkpoint_every_steps=0"});
      ASSERT_EQ(r.code, 0) << ranks << " ranks, round " << round << ":\n" << r.err;
      EXPECT_EQ(ListDir(dir + "/data/train").size(), 4u) << r.err;
      EXPECT_EQ(ListDir(dir + "/data/test").size(), 1u) << r.err;
      EXPECT_FALSE(fs::exists(dir + "/data.partial")) << "a partial data folder was left";
      EXPECT_NE(r.out.find("held-out metrics"), std::string::npos) << r.out;
      fs::remove_all(dir);
    }
  }
}

// A signal while a rank waits for its group to form (its peer never comes): the rank cannot stop
// cleanly there, so it ends promptly with 130 and says why, instead of waiting out the connect
// deadline (five minutes) or being killed by the launcher's grace period.
TEST(LaunchTest, ASignalDuringFormationEndsTheRankPromptly) {
  std::string why;
  auto run = TrainRun::Make("signal_formation", "", &why);
  if (!run) GTEST_SKIP() << why;
  for (int sig : {SIGINT, SIGTERM}) {
    ::setenv("REEL_RANK", "0", 1);
    ::setenv("REEL_WORLD_SIZE", "2", 1);
    ::setenv("REEL_COORDINATOR", ("127.0.0.1:" + std::to_string(FreeLoopbackPort())).c_str(), 1);
    ::setenv("REEL_TRANSPORT", "tcp", 1);
    Background rank(run->dir(), {"train", "--config", run->config()});
    for (const char* v : {"REEL_RANK", "REEL_WORLD_SIZE", "REEL_COORDINATOR", "REEL_TRANSPORT"})
      ::unsetenv(v);
    ASSERT_TRUE(rank.started());
    std::this_thread::sleep_for(std::chrono::seconds(1));  // waiting for rank 1, which never comes
    rank.Signal(sig);
    const auto sent = std::chrono::steady_clock::now();
    // Far beyond the promise of about a second (not a timing assertion): only a rank that waits
    // out its connect deadline reaches it.
    std::optional<int> code = rank.WaitAtMost(std::chrono::seconds(60));
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    ASSERT_TRUE(code.has_value()) << "still waiting 60 s after the signal:\n" << rank.err();
    EXPECT_EQ(*code, 130) << rank.err();
    EXPECT_NE(rank.err().find("interrupted where the work cannot stop cleanly"), std::string::npos)
        << rank.err();
    std::cerr << "signal " << sig << " during formation: the rank ended " << took << " s later\n";
  }
}

}  // namespace
}  // namespace reel::e2e
