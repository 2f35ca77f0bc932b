// Helpers for tests of `reel launch`: a launch of one shell command per rank and what every rank
// said, a launch running in the background (output to files, a bounded wait that kills it when
// it hangs), and a small `reel train` run over the tcp transport on synthetic video-level data
// with the logistic model, whose ranks write their pids to files.
#ifndef REEL_TESTS_E2E_LAUNCH_UTIL_H_
#define REEL_TESTS_E2E_LAUNCH_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "e2e_util.h"

namespace reel::e2e {

std::vector<std::string> Lines(const std::string& text);

// `reel ARGS...` running in the background, its stdout and stderr going to DIR/launch.out and
// DIR/launch.err. The destructor kills it if it still runs.
class Background {
 public:
  Background(const std::string& dir, const std::vector<std::string>& args);
  ~Background();
  bool started() const { return pid_ > 0; }
  std::string out() const;
  std::string err() const;

  // Waits (up to a generous limit; this is not a timing assertion) until stdout holds `lines`.
  bool WaitForLines(size_t lines) const;
  void Signal(int sig) const;
  // The exit code, or 128 + signal.
  int Wait();
  // As Wait(), but gives up after `limit` (a hang: then it is killed and nullopt returned).
  std::optional<int> WaitAtMost(std::chrono::seconds limit);

 private:
  std::string out_, err_;
  pid_t pid_ = -1;
  int code_ = -1;
};

// A `reel train` run for `reel launch`: data (120 synthetic video-level records, 16 classes,
// 3 shards), a config at dir()/run.pbtxt (checkpoints in dir()/ckpt, metrics log
// dir()/metrics.jsonl, one line per step), and helpers to start and watch its ranks.
class TrainRun {
 public:
  // `extra_config` is appended to the config (e.g. a transport section, more trainer fields go
  // through --set). Skips (returns false with `why` set) when a needed plugin is not built.
  static std::unique_ptr<TrainRun> Make(const std::string& name, const std::string& extra_config,
                                        std::string* why);
  ~TrainRun();

  const std::string& dir() const { return dir_; }
  std::string config() const { return dir_ + "/run.pbtxt"; }
  // Launches `n` ranks of `reel train --config run.pbtxt EXTRA...` with `launch_flags` in the
  // background; each rank writes its pid to dir()/pid.RANK first.
  std::unique_ptr<Background> Start(int n, const std::vector<std::string>& extra,
                                    const std::vector<std::string>& launch_flags = {}) const;
  pid_t Pid(int rank) const;
  // Waits (generously; not a timing assertion) until the metrics log has `steps` lines.
  bool WaitForSteps(size_t steps) const;
  // Waits (generously) until dir()/ckpt holds a complete checkpoint.
  bool WaitForCheckpoint() const;
  // The complete checkpoints (*.reelckpt, not temporary files), oldest first.
  std::vector<std::string> Checkpoints() const;

 private:
  explicit TrainRun(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// The step of a checkpoint file ".../ckpt-0000000012.reelckpt".
long CheckpointStep(const std::string& path);

// Fault tests (launch_fault_test.cc, plugins/async_sgd/tests/launch_fault_test.cc): the
// transport section a user would write to detect faults quickly. A silent peer is declared
// failed after 2 s; a collective gives up after 20 s.
extern const char kQuickFaultTransport[];

// Waits for `launch` to end after a fault injected at `fault`, far longer than any deadline of
// kQuickFaultTransport (not a timing assertion: only a hang reaches it, and then the test fails
// and the Background's destructor kills what is left). Its exit code, -1 on a hang.
int WaitForTheEndAfterFault(Background& launch, std::chrono::steady_clock::time_point fault);

// Every rank in `survivors` failed with Unavailable or DeadlineExceeded naming rank `culprit`
// in launch's stderr `err`. The transport's own line ("rank N is unavailable: ...") counts
// too: launch stops the survivors as soon as it sees the failed rank, which can be before a
// survivor's trainer prints its status.
void ExpectSurvivorsNameIt(const std::string& err, int culprit, const std::vector<int>& survivors);

// `reel launch FLAGS -- sh -c SCRIPT` (each rank's shell sees its REEL_RANK).
RunResult LaunchSh(std::vector<std::string> flags, const std::string& script);

// Each of ranks 0 .. ranks-1 wrote `text` in launch's output `err` (after its "[rank R] " prefix).
void ExpectEveryRankSaid(const std::string& err, int ranks, const std::string& text);

// A loopback port that was free a moment ago: nobody listens there (0 if none could be had).
int FreeLoopbackPort();

}  // namespace reel::e2e

#endif  // REEL_TESTS_E2E_LAUNCH_UTIL_H_
