// Every interrupted reel command exits with status 130, on SIGINT (Ctrl-C) as on SIGTERM (what
// Slurm, Kubernetes, mpirun and `timeout` send), as docs/training.md says. Each command gets work
// that lasts well past the moment it is signalled; the signal is sent once reel handles the signals
// and, for a command whose work shows, once it is at work (a file of its output exists).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "e2e_util.h"

namespace reel::e2e::interrupt_test {
namespace {

namespace fs = std::filesystem;

const std::string kRepo = REEL_SOURCE_DIR;

// True once process `pid` handles SIGINT and SIGTERM (reel's main installs the handler first of
// all; before it, in the dynamic loader, a signal would end any program by itself).
bool HandlesStopSignals(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const unsigned long long caught = std::stoull(line.substr(7), nullptr, 16);
    return (caught >> (SIGINT - 1) & 1) && (caught >> (SIGTERM - 1) & 1);
  }
  return false;
}

// True when a regular file exists anywhere under `dir`.
bool HasFileUnder(const std::string& dir) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) return true;
  return false;
}

struct Case {
  std::string name;
  std::vector<std::string> args;       // after `reel`, run from the repository root
  std::function<bool(pid_t)> at_work;  // the command has started its work
};

// Data and a checkpoint the cases read, made once.
class InterruptTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(ScratchDir("interrupt"));
    RunResult r = Reel({"synth", "--out", *dir_ + "/data", "--videos", "64", "--test-videos", "600",
                        "--classes", "16", "--level", "frame", "--shards", "2", "--min-frames",
                        "60", "--max-frames", "120", "--seed", "3"});
    ASSERT_EQ(r.code, 0) << r.err;
    r = Reel({"train", "--config", kRepo + "/configs/two_stream.pbtxt", "--quiet", "--set",
              "data.options.files=" + *dir_ + "/data/train/*.tfrecord", "--set",
              "eval_data.options.files=" + *dir_ + "/data/train/*.tfrecord", "--set",
              "trainer.steps=2", "--set", "trainer.eval_every_steps=0", "--set",
              "trainer.checkpoint_dir=" + *dir_ + "/ckpt", "--set",
              "trainer.metrics_log=" + *dir_ + "/metrics.jsonl", "--set",
              "trainer.tensorboard_dir=" + *dir_ + "/tb"});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }

  // Runs the case, signals it with `sig` once at work, and returns its exit status (128 + the
  // signal when a signal ended it, which `killed` then says); "" in `why` unless something else
  // went wrong.
  static int Interrupt(const Case& c, int sig, bool* killed, std::string* why) {
    return Interrupt(c, {{0, sig}}, killed, why);
  }

  // The same with several signals: each after its delay, counted from the previous one.
  static int Interrupt(const Case& c, const std::vector<std::pair<int, int>>& delay_ms_and_signal,
                       bool* killed, std::string* why) {
    std::vector<std::string> argv_s = {REEL_EXE};
    argv_s.insert(argv_s.end(), c.args.begin(), c.args.end());
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& s : argv_s) argv.push_back(s.data());
      argv.push_back(nullptr);
      if (::chdir(kRepo.c_str()) != 0) ::_exit(127);
      FILE* devnull = std::freopen("/dev/null", "w", stdout);
      (void)devnull;
      ::execv(REEL_EXE, argv.data());
      ::_exit(127);
    }
    // A generous limit on the wait for the command to start its work, not a timing assertion.
    int status = 0;
    bool at_work = false;
    for (int i = 0; i < 60000 && !at_work; ++i) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        *why = c.name + " ended before it could be interrupted: give it more work";
        return -1;
      }
      at_work = HandlesStopSignals(pid) && c.at_work(pid);
      if (!at_work) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!at_work) *why = c.name + " did not start its work";
    for (const auto& [delay_ms, sig] : delay_ms_and_signal) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      ::kill(pid, sig);
    }
    if (::waitpid(pid, &status, 0) != pid) *why = "waitpid failed";
    *killed = !WIFEXITED(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // The cases' outputs go under a folder of their own for each signal.
  static std::vector<Case> Cases(int sig) {
    const std::string test = *dir_ + "/data/test/*.tfrecord";
    const std::string d = *dir_ + "/" + std::to_string(sig);
    auto any = [](pid_t) { return true; };
    auto wrote = [](std::string dir) { return [dir](pid_t) { return HasFileUnder(dir); }; };
    const std::string so = fs::path(REEL_EXE).parent_path().parent_path().string() +
                           "/lib/reel/plugins/libreel_tfrecord.so";
    return {
        {"demo", {"demo", "--workdir", d + "/demo"}, wrote(d + "/demo")},
        {"train",
         {"train", "--config", "configs/two_stream.pbtxt", "--quiet", "--set",
          "data.options.files=" + test, "--set", "eval_data.options.files=" + test, "--set",
          "trainer.steps=1000000", "--set", "trainer.checkpoint_dir=" + d + "/train/ckpt", "--set",
          "trainer.metrics_log=" + d + "/train/metrics.jsonl", "--set",
          "trainer.tensorboard_dir=" + d + "/train/tb", "--set", "trainer.log_every_steps=1"},
         wrote(d + "/train")},
        // No signal handling of their own: at work once reel handles the signals.
        {"eval", {"eval", "--checkpoint", *dir_ + "/ckpt", "--data", test}, any},
        {"predict", {"predict", "--checkpoint", *dir_ + "/ckpt", "--data", test}, any},
        {"launch",
         {"launch", "--nproc-per-node", "1", "--", REEL_EXE, "synth", "--out", d + "/launch",
          "--videos", "1000000", "--classes", "16", "--shards", "1"},
         wrote(d + "/launch")},
        {"tune",
         {"tune", "--config", "configs/tune_moe.pbtxt", "--workdir", d + "/tune"},
         wrote(d + "/tune")},
        {"bench",
         {"bench", "storage", "--name", "file", "--root", d + "/bench", "--bytes", "100000000",
          "--reps", "1000"},
         wrote(d + "/bench")},
        {"synth",
         {"synth", "--out", d + "/synth", "--videos", "1000000", "--classes", "16", "--shards",
          "1"},
         wrote(d + "/synth")},
        {"inspect", {"inspect", test}, any},
        {"plugins check", {"plugins", "check", so}, any},
    };
  }

  static std::string* dir_;
};
std::string* InterruptTest::dir_ = nullptr;

// `reel version`, `reel plugins` and `reel --help` print and end within milliseconds: there is
// no work to interrupt, and the handler they would run is the one `plugins check` shows.
TEST_P(InterruptTest, EveryCommandExits130) {
  const int sig = GetParam();
  for (const Case& c : Cases(sig)) {
    SCOPED_TRACE(c.name);
    std::string why;
    bool killed = false;
    const int code = Interrupt(c, sig, &killed, &why);
    ASSERT_EQ(why, "");
    EXPECT_FALSE(killed) << "reel " << c.name << " was ended by " << strsignal(sig);
    EXPECT_EQ(code, 130) << "reel " << c.name << " interrupted by " << strsignal(sig);
  }
}

// Slurm's preemption TERMs every task and the sbatch examples' trap forwards another TERM: the
// second and third signals must not cut the step or the checkpoint short (docs/training.md).
TEST_F(InterruptTest, TermAfterTermStillFinishesTheCheckpoint) {
  const std::string d = *dir_ + "/term-term";
  const Case train = Cases(SIGTERM)[1];
  ASSERT_EQ(train.name, "train");
  Case c = train;
  for (std::string& a : c.args)
    if (const size_t at = a.find(*dir_ + "/" + std::to_string(SIGTERM)); at != std::string::npos)
      a.replace(at, (*dir_ + "/" + std::to_string(SIGTERM)).size(), d);
  c.at_work = [d](pid_t) { return HasFileUnder(d + "/train"); };
  std::string why;
  bool killed = false;
  const int code = Interrupt(c, {{0, SIGTERM}, {200, SIGTERM}, {100, SIGTERM}}, &killed, &why);
  ASSERT_EQ(why, "");
  EXPECT_FALSE(killed);
  EXPECT_EQ(code, 130);
  int complete = 0;
  for (const auto& e : fs::directory_iterator(d + "/train/ckpt")) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << "left behind: " << name;
    complete += name.rfind("ckpt-", 0) == 0 ? 1 : 0;
  }
  EXPECT_GE(complete, 1) << "no checkpoint was written";
  // The checkpoint is whole: a run resumes from it.
  const RunResult r =
      Reel({"eval", "--checkpoint", d + "/train/ckpt", "--data", *dir_ + "/data/test/*.tfrecord"});
  EXPECT_EQ(r.code, 0) << r.err;
}

INSTANTIATE_TEST_SUITE_P(SigintAndSigterm, InterruptTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) {
                           return std::string(info.param == SIGINT ? "Sigint" : "Sigterm");
                         });

}  // namespace
}  // namespace reel::e2e::interrupt_test
