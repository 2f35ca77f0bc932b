// RankSupervisor: the process half of `reel launch`. Starts one child process per local rank,
// copies each child's stdout and stderr to ours line by line with a "[rank K] " prefix, and
// decides the run's outcome:
//   - every rank exits 0                 -> exit code 0;
//   - a rank fails (non-zero exit or a signal) while no interrupt is in progress -> the others
//     are stopped (SIGTERM to their process groups, SIGKILL after `grace`), and the outcome names
//     the first rank that failed; exit code: its exit status, or 128 + the signal that killed it;
//   - with `keep_going`, a rank other than rank 0 that fails is reported and the others go on
//     (task-parallel jobs such as `reel tune`, whose rank 0 hands the failed rank's work to
//     others); the exit code is then rank 0's, or, on a node without rank 0, non-zero only when
//     every rank failed;
//   - SIGINT or SIGTERM reaches the supervisor -> forwarded to every running rank (a second one
//     is forwarded too), the supervisor waits for all of them; exit code 130, on either signal,
//     as every interrupted reel command.
//   - a rank stopped by a signal (SIGSTOP) is reported when it stops and when it continues; if
//     another rank fails while it is stopped, the outcome names it beside the failed rank, and
//     every SIGTERM or SIGINT sent to a stopped rank is followed by SIGCONT so it can act on it.
//   - ranks still stopped when every other rank has ended (with `keep_going` the others may all
//     have failed, or finished without a lost worker) would wait forever: they are "stranded",
//     named and ended (SIGTERM and SIGCONT, SIGKILL after `grace`). A stranded rank is a failure
//     (exit code 128 + the stopping signal, as a shell gives a stopped job), but with
//     `keep_going` for a rank other than 0, which is tolerated (the exit code stays rank 0's).
//
// Each child runs in its own process group (so a terminal's Ctrl-C reaches the ranks once,
// through the supervisor, and stopping a rank stops what it started), with stdin on /dev/null,
// and dies with SIGKILL if the supervisor itself dies (PR_SET_PDEATHSIG).
//
// Plain POSIX + Linux signalfd; no threads. Thread-safety: Run() blocks SIGINT, SIGTERM and
// SIGCHLD in the calling thread while it runs, so call it from the main thread of a process with
// no other children.
#ifndef REEL_CORE_CLI_RANK_SUPERVISOR_H_
#define REEL_CORE_CLI_RANK_SUPERVISOR_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reel/status.h"

namespace reel::cli {

struct RankSpec {
  int rank = 0;                          // global rank, used in prefixes and messages
  std::vector<std::string> environment;  // "NAME=value" entries set on top of ours
};

// What a watched descriptor (SuperviseOptions::watch_fd) asks for.
enum class WatchVerdict {
  kGoOn,    // nothing for the ranks
  kStop,    // stop them as after a failure (SIGTERM, SIGKILL after the grace period); their
            // exits are then no failure (SuperviseOutcome::stopped_on_request)
  kForget,  // the descriptor has nothing more to say: stop watching it
};

struct SuperviseOptions {
  std::vector<std::string> command;  // argv of every rank; command[0] is searched on PATH
  std::vector<RankSpec> ranks;
  std::chrono::milliseconds grace{30000};  // SIGTERM -> SIGKILL when stopping after a failure
  bool keep_going = false;                 // failures of ranks other than 0 stop nobody
  int out_fd = 1;                          // where the ranks' prefixed stdout goes
  int err_fd = 2;                          // where their stderr and our own messages go
  // Another reason to stop the ranks (`reel launch --nnodes MIN:MAX`: the rendezvous' connection):
  // when `watch_fd` is readable, `on_watch` reads it and says what to do. -1: none.
  int watch_fd = -1;
  std::function<WatchVerdict()> on_watch;
};

struct RankExit {
  int rank = 0;
  bool signaled = false;
  int value = 0;  // exit status, or the signal number when `signaled`

  bool ok() const { return !signaled && value == 0; }
  int ExitCode() const { return signaled ? 128 + value : value; }
  // "exited with status 3" / "was killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

// A rank stopped by a signal (SIGSTOP, SIGTSTP, ...): alive, but silent until SIGCONT.
struct RankStop {
  int rank = 0;
  int signal = 0;
  // "was stopped by signal 19 (SIGSTOP)".
  std::string Describe() const;
};

struct SuperviseOutcome {
  int exit_code = 0;
  std::optional<RankExit> first_failure;  // the rank that failed first, unless interrupted
  // Ranks that were stopped when the first failure happened: the ranks waiting for a stopped
  // rank fail (their transport gives up on it) while it never exits, so it is named here.
  std::vector<RankStop> stopped_at_failure;
  std::vector<RankExit> tolerated;  // with keep_going: ranks != 0 that failed
  std::vector<RankStop> stranded;   // ranks stopped when every other rank had ended
  int interrupted_by = 0;           // SIGINT or SIGTERM when one was forwarded
  bool stopped_on_request = false;  // on_watch said kStop before anything failed
};

// " while rank 2 was stopped by signal 19 (SIGSTOP)" for every stopped rank; "" for none.
std::string WhileStopped(const std::vector<RankStop>& stopped);
// "rank 2 was stopped by signal 19 (SIGSTOP) and every other rank ended without it" (every
// stranded rank named).
std::string Stranded(const std::vector<RankStop>& stranded);

// Runs the ranks to completion. Errors only for what prevents starting them (a command that
// cannot be executed, no pipes or processes left); ranks already started are killed then.
Result<SuperviseOutcome> SuperviseRanks(const SuperviseOptions& options);

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_RANK_SUPERVISOR_H_
