// `reel train` with optimizer async_sgd, end to end: ranks as threads (inproc) and as tcp
// processes under `reel launch` train a video-level model that beats the frequency baseline on
// held-out videos, rank 0 of the workers writes the checkpoint, `--resume` continues from it,
// and bad options stop the run before any training with the option named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>

#include "e2e_util.h"
#include "lost_share.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kClasses = 8;

class AsyncTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* c : {"tfrecord", "logistic", "async_sgd"})
      if (Reel({"plugins", "show", c}).code != 0) missing_ = c;
    if (!missing_.empty()) return;
    dir_ = ScratchDir("async_sgd_train");
    RunResult r =
        Reel({"synth", "--out", dir_ + "/data", "--videos", "240", "--classes",
              std::to_string(kClasses), "--level", "video", "--shards", "3", "--seed", "7"});
    ASSERT_EQ(r.code, 0) << r.err;
    auto files = ListDir(dir_ + "/data");
    ASSERT_EQ(files.size(), 3u);
    test_ = files.back();
    files.pop_back();
    train_ = files;
    baseline_ = FrequencyBaselineGap(Labels(files), Labels({test_}), kClasses);
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (!missing_.empty()) GTEST_SKIP() << "this build has no '" << missing_ << "' component";
  }

  // A run config; `extra` goes into the optimizer's options, `trainer` into trainer { }.
  static std::string Config(const std::string& run, const std::string& options,
                            const std::string& trainer) {
    const std::string path = run + ".pbtxt";
    WriteFile(path, "data {\n  name: \"tfrecord\"\n  options { key: \"files\" value: \"" +
                        train_[0] + "," + train_[1] +
                        "\" }\n  options { key: \"level\" value: \"video\" }\n}\n"
                        "eval_data {\n  name: \"tfrecord\"\n  options { key: \"files\" value: \"" +
                        test_ +
                        "\" }\n  options { key: \"level\" value: \"video\" }\n}\n"
                        "model { name: \"logistic\" }\n"
                        "optimizer {\n  name: \"async_sgd\"\n" +
                        options +
                        "}\n"
                        "trainer {\n  batch_size: 16\n  seed: 5\n  num_classes: " +
                        std::to_string(kClasses) +
                        "\n  learning_rate { base: 0.1 }\n  checkpoint_dir: \"" + run +
                        "/ckpt\"\n" + trainer + "}\n");
    return path;
  }
  static std::string Opt(const std::string& key, const std::string& value) {
    return "  options { key: \"" + key + "\" value: \"" + value + "\" }\n";
  }
  static double HeldOutGap(const std::string& run) {
    RunResult e = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", test_, "--json"});
    EXPECT_EQ(e.code, 0) << e.err;
    return JsonField(e.out, "gap");
  }

  static inline std::string missing_, dir_, test_;
  static inline std::vector<std::string> train_;
  static inline double baseline_ = 0.0;
};

TEST_F(AsyncTrain, ThreeRanksAsThreadsBeatTheBaselineAndResume) {
  const std::string run = dir_ + "/threads";
  const std::string config = Config(run, Opt("rule", "adagrad"), "  steps: 60\n  local_ranks: 3\n");
  RunResult t = Reel({"train", "--config", config});
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  EXPECT_THAT(t.out, HasSubstr("trained 60 steps"));
  const double gap = HeldOutGap(run);
  EXPECT_GT(gap, baseline_ + 0.05) << "baseline " << baseline_;
  // --resume from the final checkpoint with a larger budget continues at step 60.
  RunResult more = Reel({"train", "--config", config, "--resume", "--set", "trainer.steps=80"});
  ASSERT_EQ(more.code, 0) << more.out << more.err;
  EXPECT_THAT(more.err, HasSubstr("resumed from"));
  EXPECT_THAT(more.err, HasSubstr("at step 60"));
  EXPECT_THAT(more.out, HasSubstr("trained 80 steps"));
}

// Colocated: every rank trains and serves a shard; the ranks step independently, the lead
// evaluates and checkpoints, and a resume continues where it ended, also on fewer or more ranks
// (the servers' state, adagrad's accumulators, is then cut anew: src/shard_states.h).
TEST_F(AsyncTrain, ColocatedRanksLearnAndResume) {
  const std::string run = dir_ + "/colocated";
  const std::string config = Config(run, Opt("rule", "adagrad") + Opt("colocated", "true"),
                                    "  steps: 60\n  local_ranks: 3\n");
  RunResult t = Reel({"train", "--config", config});
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  EXPECT_THAT(t.out, HasSubstr("trained 60 steps"));
  EXPECT_GT(HeldOutGap(run), baseline_ + 0.05) << "baseline " << baseline_;
  RunResult more = Reel({"train", "--config", config, "--resume", "--set", "trainer.steps=70"});
  ASSERT_EQ(more.code, 0) << more.out << more.err;
  EXPECT_THAT(more.err, HasSubstr("at step 60"));
  EXPECT_THAT(more.out, HasSubstr("trained 70 steps"));
  for (const auto& [ranks, steps] : {std::pair{"2", "85"}, std::pair{"4", "100"}}) {
    RunResult other = Reel({"train", "--config", config, "--resume", "--set",
                            std::string("trainer.local_ranks=") + ranks, "--set",
                            std::string("trainer.steps=") + steps});
    ASSERT_EQ(other.code, 0) << ranks << " ranks: " << other.out << other.err;
    EXPECT_THAT(other.out, HasSubstr(std::string("trained ") + steps + " steps"));
  }
  EXPECT_GT(HeldOutGap(run), baseline_ + 0.05) << "baseline " << baseline_;
}

TEST_F(AsyncTrain, PerEpochDeltasTwoServersLearnToo) {
  const std::string run = dir_ + "/epoch";
  const std::string config =
      Config(run, Opt("rule", "sgd") + Opt("frequency", "epoch") + Opt("servers", "2"),
             "  epochs: 3\n  local_ranks: 4\n");
  RunResult t = Reel({"train", "--config", config});
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  EXPECT_GT(HeldOutGap(run), baseline_ + 0.05) << "baseline " << baseline_;
}

// The examples count of a run's summary line ("trained N steps (X examples, ...").
int64_t ExamplesOf(const std::string& out) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(out, m, std::regex(R"(trained \d+ steps \((\d+) examples)")))
      << out;
  return m.empty() ? -1 : std::stoll(m[1]);
}

// Workers step independently, so they stop in different epochs: 33 records over 2 workers are
// shares of 17 and 16, 2 batches and 1 of 16 a worker's epoch, and after 4 steps each one worker
// has read 2 epochs and the other 4. A resume takes each worker's own epoch back (on the same
// number of workers: 4 and 2 epochs left of a 6-epoch budget, 4 x 17 + 2 x 16 = 100 examples; a
// worker that took the lead's epoch trained 4 x 16 more), and on another number it resumes the
// earliest epoch, which both had read whole: 4 epochs x 33 records (it was refused before). Their
// steps differ likewise.
TEST_F(AsyncTrain, ResumeTakesEachWorkersEpochOnAnyNumberOfWorkers) {
  const std::string data = dir_ + "/odd";
  ASSERT_EQ(Reel({"synth", "--out", data, "--videos", "33", "--classes", std::to_string(kClasses),
                  "--level", "video", "--shards", "1", "--seed", "3"})
                .code,
            0);
  const std::string files = "data.options.files=" + data + "/*.tfrecord";
  for (const int resumed_workers : {2, 3}) {
    const std::string run = dir_ + "/epochs_apart_" + std::to_string(resumed_workers);
    const std::string config =
        Config(run, Opt("rule", "sgd"), "  steps: 4\n  local_ranks: 3\n  eval_every_steps: 0\n");
    RunResult first = Reel({"train", "--config", config, "--set", files});
    ASSERT_EQ(first.code, 0) << first.out << first.err;
    const int64_t before = ExamplesOf(first.out);
    EXPECT_EQ(before, 2 * 16 + 2 * 1 + 4 * 16);
    RunResult more = Reel({"train", "--config", config, "--set", files, "--resume", "--set",
                           "trainer.steps=0", "--set", "trainer.epochs=6", "--set",
                           "trainer.local_ranks=" + std::to_string(resumed_workers + 1)});
    ASSERT_EQ(more.code, 0) << more.out << more.err;
    EXPECT_EQ(ExamplesOf(more.out) - before, resumed_workers == 2 ? 4 * 17 + 2 * 16 : 4 * 33)
        << more.out << more.err;
  }
  // A step budget counts each worker's own steps: after 2 epochs one has taken 4 and the other 2,
  // so 6 steps leave them 2 (17 examples) and 4 (64); the lead's step for both left 2 and 2.
  const std::string run = dir_ + "/steps_apart";
  const std::string config = Config(run, Opt("rule", "sgd"), "  local_ranks: 3\n");
  RunResult first =
      Reel({"train", "--config", config, "--set", files, "--set", "trainer.epochs=2"});
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  RunResult more = Reel({"train", "--config", config, "--set", files, "--resume", "--set",
                         "trainer.steps=6", "--set", "trainer.epochs=0"});
  ASSERT_EQ(more.code, 0) << more.out << more.err;
  EXPECT_EQ(ExamplesOf(more.out) - ExamplesOf(first.out), 17 + 4 * 16) << more.out << more.err;
}

TEST_F(AsyncTrain, TcpProcessesUnderReelLaunchBeatTheBaseline) {
  if (Reel({"plugins", "show", "tcp"}).code != 0) GTEST_SKIP() << "the tcp plugin is not built";
  const std::string run = dir_ + "/tcp";
  const std::string config = Config(run, Opt("rule", "adagrad"), "  steps: 60\n");
  RunResult t = Reel({"launch", "-n", "3", "--", "reel", "train", "--config", config});
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  EXPECT_THAT(t.out, HasSubstr("served parameters until every worker finished"));
  // Each worker says its own steps, epoch and loss; only the lead (rank 1) knows every worker's
  // examples: more than its own 60 batches of 16.
  std::smatch lead, other;
  ASSERT_TRUE(std::regex_search(
      t.out, lead,
      std::regex(R"(\[rank 1\] trained 60 steps \((\d+) examples by all workers, epoch \d+\), )"
                 R"(final loss [0-9.]+ \(steps, epoch and loss: this worker's\))")))
      << t.out;
  EXPECT_GT(std::stoll(lead[1]), 60 * 16) << t.out;
  EXPECT_TRUE(std::regex_search(
      t.out, other,
      std::regex(R"(\[rank 2\] trained 60 steps \(epoch \d+\), final loss [0-9.]+ )"
                 R"(\(this worker's; the lead worker reports the examples\))")))
      << t.out;
  EXPECT_GT(HeldOutGap(run), baseline_ + 0.05) << "baseline " << baseline_;
}

// One process per rank under mpirun: the host picks transport mpi, rank 0 serves.
TEST_F(AsyncTrain, ThreeMpiProcessesBeatTheBaseline) {
  const std::string mpirun = REEL_MPIRUN;
  if (mpirun.empty()) GTEST_SKIP() << "no mpirun in this build";
  if (Reel({"plugins", "show", "mpi"}).code != 0) GTEST_SKIP() << "the mpi plugin is not built";
  const std::string run = dir_ + "/mpi";
  const std::string config = Config(run, Opt("rule", "adagrad"), "  steps: 60\n");
  const std::string out = run + ".out";
  // Under ASan, Open MPI's allocations kept until exit are suppressed by library
  // (scripts/lsan.supp); only the slow unwinder reaches those frame-pointer-less libraries
  // (as for the mpi plugin's tests, plugins/mpi/CMakeLists.txt). Elsewhere the variable is unused.
  const int status =
      std::system(("LSAN_OPTIONS=\"$LSAN_OPTIONS:fast_unwind_on_malloc=0\" " + mpirun + " -n 3 " +
                   REEL_EXE + " train --config " + config + " >" + out + " 2>&1 </dev/null")
                      .c_str());
  const std::string log = ReadFile(out);
  ASSERT_EQ(status, 0) << log;
  EXPECT_THAT(log, HasSubstr("using transport 'mpi'"));
  EXPECT_THAT(log, HasSubstr("served parameters until every worker finished"));
  EXPECT_THAT(log, HasSubstr("trained 60 steps"));
  EXPECT_GT(HeldOutGap(run), baseline_ + 0.05) << "baseline " << baseline_;
}

// `reel ARGS...` in the background, stdout and stderr to `log`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    // Both streams append (O_APPEND), so neither writes over the other's lines.
    if (FILE* f = std::fopen(log.c_str(), "w")) std::fclose(f);
    if (!std::freopen(log.c_str(), "a", stdout) || !std::freopen(log.c_str(), "a", stderr))
      _exit(126);
    std::vector<std::string> copy = args;
    std::vector<char*> argv = {const_cast<char*>(REEL_EXE)};
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(REEL_EXE, argv.data());
    _exit(127);
  }
  return pid;
}

// The `reel train` process whose environment holds `env` (e.g. REEL_RANK=1) and whose command
// line holds `needle`.
pid_t FindRank(const std::string& needle, const std::string& env) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadFile(e.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) == std::string::npos || cmdline.find(" train ") == std::string::npos)
      continue;
    std::string environ = ReadFile(e.path().string() + "/environ");
    std::replace(environ.begin(), environ.end(), '\0', '\n');
    if (("\n" + environ).find("\n" + env + "\n") != std::string::npos) return std::stoi(name);
  }
  return -1;
}

// The step of the newest checkpoint in `dir` (ckpt-<step>.reelckpt), -1 if none.
int64_t NewestCheckpointStep(const std::string& dir) {
  int64_t newest = -1;
  if (!fs::exists(dir)) return newest;
  const std::regex name("ckpt-0*([0-9]+)\\.reelckpt");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, m, name)) newest = std::max<int64_t>(newest, std::stoll(m[1]));
  }
  return newest;
}

// The newest version for which `dir` holds every one of `shards` servers' own shard checkpoint
// (async-shard-v<version>-<shard>-of-<shards>.rasg), -1 if none.
int64_t NewestCompleteShardSet(const std::string& dir, int shards) {
  std::map<int64_t, int> files;
  const std::regex name("async-shard-v0*([0-9]+)-([0-9]+)-of-" + std::to_string(shards) +
                        "\\.rasg");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, m, name)) ++files[std::stoll(m[1])];
  }
  int64_t newest = -1;
  for (const auto& [version, n] : files)
    if (n == shards) newest = version;
  return newest;
}

// The servers' own checkpoints without a trainer checkpoint (as when the lead dies before its
// first one): `--resume` refuses on every rank, naming the directory and the set, and keeps the
// files; the servers' files alone hold no data positions or step to resume from.
TEST_F(AsyncTrain, ResumeRefusesAShardSetWithoutATrainerCheckpoint) {
  const std::string run = dir_ + "/shards_only";
  const std::string config = Config(run, Opt("rule", "sgd") + Opt("server_checkpoint_every", "10"),
                                    "  steps: 20\n  local_ranks: 3\n");
  RunResult t = Reel({"train", "--config", config});
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  const int64_t set = NewestCompleteShardSet(run + "/ckpt", 1);
  ASSERT_GE(set, 10);
  for (const auto& e : fs::directory_iterator(run + "/ckpt"))
    if (e.path().extension() == ".reelckpt") fs::remove(e.path());
  ASSERT_EQ(NewestCheckpointStep(run + "/ckpt"), -1);
  RunResult again = Reel({"train", "--config", config, "--resume"});
  EXPECT_NE(again.code, 0) << again.out << again.err;
  EXPECT_THAT(again.err, HasSubstr("--resume found no trainer checkpoint (ckpt-*.reelckpt) in " +
                                   run + "/ckpt, but the servers' complete shard set of version " +
                                   std::to_string(set)));
  EXPECT_EQ(NewestCompleteShardSet(run + "/ckpt", 1), set);
}

// Four ranks under `reel launch --keep-going -- reel train --config C`, output to `log`. Once a
// periodic checkpoint of step 20 or later exists in `run`/ckpt, rank `victim` is killed with
// SIGKILL; then the launch is waited for (its wait status in *status). False if the victim was not
// found within a generous limit (not a timing assertion: a broken run must not hang the suite).
bool LaunchAndKillAfterCheckpoint(const std::string& config, const std::string& run, int victim,
                                  const std::string& log, int* status) {
  const pid_t launch =
      Spawn({"launch", "-n", "4", "--keep-going", "--", "reel", "train", "--config", config}, log);
  if (launch <= 0) return false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  pid_t pid = -1;
  // The victim's process is looked up once (scanning /proc is slow), the checkpoint often, so
  // the victim is killed soon after its report at step 20, long before its share is done.
  while (std::chrono::steady_clock::now() < give_up) {
    if (pid <= 0) pid = FindRank(config, "REEL_RANK=" + std::to_string(victim));
    if (pid > 0 && NewestCheckpointStep(run + "/ckpt") >= 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(pid > 0 ? 2 : 20));
  }
  const bool found = pid > 0 && std::chrono::steady_clock::now() < give_up;
  kill(found ? pid : launch, SIGKILL);
  waitpid(launch, status, 0);
  return found;
}

// Four tcp processes (servers 0 and 1, workers 2 and 3). Server rank 1 is killed with SIGKILL once
// a periodic checkpoint exists: both workers fail with Unavailable naming it instead of hanging,
// the launch exits non-zero naming it, and `--resume` on a fresh launch continues to the end from
// the newest checkpoint, with the shards from the newest complete set of the servers' own
// checkpoints (every 10 updates) when that is newer.
TEST_F(AsyncTrain, AKilledServerStopsEveryWorkerAndResumeContinues) {
  if (Reel({"plugins", "show", "tcp"}).code != 0) GTEST_SKIP() << "the tcp plugin is not built";
  const std::string run = dir_ + "/killed";
  const std::string config =
      Config(run,
             Opt("rule", "adagrad") + Opt("servers", "2") + Opt("timeout_ms", "60000") +
                 Opt("server_checkpoint_every", "10"),
             "  steps: 1000000\n  checkpoint_every_steps: 20\n");
  const std::string log = run + ".log";
  int status = 0;
  ASSERT_TRUE(LaunchAndKillAfterCheckpoint(config, run, 1, log, &status)) << ReadFile(log);
  const std::string out = ReadFile(log);
  // The launch fails (rank 0, the other server, had no worker left to finish the run), and its
  // last line names the killed server first.
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << out;
  EXPECT_THAT(out, HasSubstr("were tolerated (--keep-going): rank 1 was killed by signal 9"));
  // Each worker fails with Unavailable naming the killed server (the transport isolates a lost
  // rank in async runs, so the error is the worker's own request to it: a push, its ack or a
  // pull).
  for (const char* worker : {"2", "3"})
    EXPECT_TRUE(std::regex_search(
        out, std::regex(std::string("\\[rank ") + worker + "\\] reel train: UNAVAILABLE: [^\\n]*" +
                        "server rank 1[^0-9][^\\n]*rank 1 is unavailable")))
        << "worker rank " << worker << ":\n"
        << out;
  const int64_t resume_at = NewestCheckpointStep(run + "/ckpt");
  ASSERT_GE(resume_at, 20);
  // Both servers wrote their shards (the killed one too, before it died).
  const int64_t set = NewestCompleteShardSet(run + "/ckpt", 2);
  ASSERT_GE(set, 10) << "no complete set of the servers' own checkpoints in " << run << "/ckpt";
  const std::string until = std::to_string(resume_at + 20);
  RunResult again = Reel({"launch", "-n", "4", "--", "reel", "train", "--config", config,
                          "--resume", "--set", "trainer.steps=" + until});
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_THAT(again.out + again.err, HasSubstr("at step " + std::to_string(resume_at)));
  EXPECT_THAT(again.out + again.err, HasSubstr("newest complete shard set in " + run +
                                               "/ckpt: version " + std::to_string(set) + ";"));
  EXPECT_THAT(again.out, HasSubstr("trained " + until + " steps"));
}

// Four tcp processes under `reel launch --keep-going` (server 0, workers 1-3, worker 1 the lead).
// Worker rank 3 is killed with SIGKILL once the lead wrote a periodic checkpoint (of step 20 or
// later; 200 steps are the budget): the server drops it, the lead writes the final
// checkpoint without it, and the launch succeeds; the server, the lead's log and the summary
// say what of its share was not trained.
TEST_F(AsyncTrain, AKilledWorkerIsDroppedAndTheOthersFinish) {
  if (Reel({"plugins", "show", "tcp"}).code != 0) GTEST_SKIP() << "the tcp plugin is not built";
  const std::string run = dir_ + "/lost_worker";
  const std::string config = Config(run, Opt("rule", "adagrad") + Opt("timeout_ms", "60000"),
                                    "  steps: 200\n  checkpoint_every_steps: 20\n");
  const std::string log = run + ".log";
  int status = 0;
  ASSERT_TRUE(LaunchAndKillAfterCheckpoint(config, run, 3, log, &status)) << ReadFile(log);
  const std::string out = ReadFile(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_THAT(out, HasSubstr("rank 3 was killed by signal 9"));
  EXPECT_THAT(out, HasSubstr("[rank 1] lost rank 3 after its report at step "));
  EXPECT_THAT(out, HasSubstr("were not trained; the others finished the run"));
  EXPECT_THAT(out, HasSubstr("[rank 1] trained 200 steps"));
  // The victim was killed after the lead's checkpoint of step 20, long after its last report
  // (the lead's checkpoints wait for no worker's report, so that may be its start).
  ExpectTheLostShareFromTheServersCount(out, 3, 1, 200, 16);
  EXPECT_EQ(NewestCheckpointStep(run + "/ckpt"), 200);
  EXPECT_GT(HeldOutGap(run), baseline_ + 0.05) << "baseline " << baseline_;
}

// Four tcp processes under `reel launch --keep-going` (server 0, workers 1-3, worker 1 the lead).
// The lead is killed with SIGKILL once it wrote a periodic checkpoint (of step 20 or later; 200
// steps are the budget): the server names worker 2 as the new lead when the others find the lead
// gone (at their next report, or waiting for its end), worker 2 takes over, writes the final
// checkpoint and reports the killed lead's untrained share as for any lost worker, and the launch
// succeeds. The final checkpoint loads and beats the baseline.
TEST_F(AsyncTrain, AKilledLeadIsReplacedAndTheOthersFinish) {
  if (Reel({"plugins", "show", "tcp"}).code != 0) GTEST_SKIP() << "the tcp plugin is not built";
  const std::string run = dir_ + "/lost_lead";
  const std::string config = Config(run, Opt("rule", "adagrad") + Opt("timeout_ms", "60000"),
                                    "  steps: 200\n  checkpoint_every_steps: 20\n");
  const std::string log = run + ".log";
  int status = 0;
  ASSERT_TRUE(LaunchAndKillAfterCheckpoint(config, run, 1, log, &status)) << ReadFile(log);
  const std::string out = ReadFile(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_THAT(out, HasSubstr("rank 1 was killed by signal 9"));
  EXPECT_THAT(out, HasSubstr("[rank 2] training rank 1 (rank 2) takes over as the lead from "
                             "training rank 0 (rank 1), which was lost"));
  EXPECT_THAT(out, HasSubstr("[rank 2] lost rank 1 after its report at step "));
  EXPECT_THAT(out, HasSubstr("[rank 2] trained 200 steps"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("[rank 3] lost rank")));
  // The new lead's summary counts the killed lead's share from what the server applied of it.
  ExpectTheLostShareFromTheServersCount(out, 1, 2, 200, 16);
  EXPECT_EQ(NewestCheckpointStep(run + "/ckpt"), 200);
  EXPECT_GT(HeldOutGap(run), baseline_ + 0.05) << "baseline " << baseline_;
}

TEST_F(AsyncTrain, BadOptionsStopTheRunBeforeTraining) {
  struct Case {
    std::string options, trainer, says;
  };
  const Case cases[] = {
      {"", "  steps: 5\n", "option 'servers': 1 server rank(s) in a world of 1 leave no worker"},
      {Opt("servers", "3"), "  steps: 5\n  local_ranks: 3\n",
       "option 'servers': 3 server rank(s) in a world of 3 leave no worker"},
      {Opt("max_staleness", "-1"), "  steps: 5\n  local_ranks: 2\n",
       "option 'max_staleness': -1 is negative"},
  };
  for (const Case& c : cases) {
    const std::string run = dir_ + "/bad";
    RunResult t = Reel({"train", "--config", Config(run, c.options, c.trainer)});
    EXPECT_NE(t.code, 0) << c.says;
    EXPECT_THAT(t.err, HasSubstr(c.says));
    EXPECT_THAT(t.out + t.err, ::testing::Not(HasSubstr("step 1")));
    EXPECT_FALSE(fs::exists(run + "/ckpt")) << c.says;
    fs::remove_all(run);
  }
}

}  // namespace
}  // namespace reel::e2e
