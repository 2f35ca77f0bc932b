// RankSupervisor (see rank_supervisor.h).
#include "rank_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "interrupt.h"

extern char** environ;

namespace reel::cli {
namespace {

using Clock = std::chrono::steady_clock;

// How long a rank's non-zero exit waits before it is taken as the run's first failure. A rank
// killed by a signal closes its sockets before its parent can reap it, so the ranks it leaves
// behind may see it gone, fail (naming it) and exit before it is reaped itself; within this
// window the killed rank is still named as the failure, not one of those it took down.
constexpr std::chrono::milliseconds kSettle{500};

// A line longer than this is written out in pieces, each with its own prefix.
constexpr size_t kMaxLine = 64 * 1024;

std::string ErrnoText(int err) { return std::strerror(err); }

// Writes all of `data` to `fd`, retrying short writes; output errors are ignored (there is
// nobody left to tell).
void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// One of a rank's output pipes: bytes in, prefixed whole lines out.
struct OutputPipe {
  int fd = -1;    // read end, non-blocking; -1 once closed
  int sink = -1;  // our stdout or stderr
  std::string prefix;
  std::string partial;  // bytes after the last newline

  // Reads what is available; false at end of file or on an error (then the pipe is closed).
  bool Pump() {
    char buf[16384];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) {
        Close();
        return false;
      }
      Emit(std::string_view(buf, static_cast<size_t>(n)));
    }
  }

  // Appends `data` and writes every complete line, all of them in one write.
  void Emit(std::string_view data) {
    partial.append(data);
    std::string out;
    size_t start = 0;
    while (true) {
      size_t nl = partial.find('\n', start);
      if (nl == std::string::npos) {
        if (partial.size() - start < kMaxLine) break;
        nl = start + kMaxLine - 1;  // an endless line: cut it
        out.append(prefix).append(partial, start, nl + 1 - start).append("\n");
      } else {
        out.append(prefix).append(partial, start, nl + 1 - start);
      }
      start = nl + 1;
    }
    partial.erase(0, start);
    WriteAll(sink, out);
  }

  void Close() {
    if (fd < 0) return;
    if (!partial.empty()) WriteAll(sink, prefix + partial + "\n");
    partial.clear();
    ::close(fd);
    fd = -1;
  }
};

struct Child {
  int rank = 0;
  pid_t pid = -1;  // also its process group id
  bool running = false;
  int stopped_by = 0;  // the signal that stopped it (SIGSTOP, SIGTSTP, ...) until it continues
  OutputPipe out, err;
};

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
}

class Supervisor {
 public:
  explicit Supervisor(const SuperviseOptions& o) : o_(o) {}
  ~Supervisor();

  Status Start();
  SuperviseOutcome Wait();

 private:
  Status Spawn(const RankSpec& spec);
  void Reap();
  void OnExit(Child& c, int status);
  // `e` is the run's first failure: say so and stop the other ranks.
  void Fail(const RankExit& e);
  void Signal(int sig);  // to every running rank's process group
  // Ranks stopped while every other rank has ended would never end: name and end them.
  void EndStranded();
  // on_watch said kStop: stop the ranks; what they exit with is no failure.
  void StopOnRequest();
  bool IsStranded(int rank) const;
  void Say(const std::string& line) { WriteAll(o_.err_fd, "reel launch: " + line + "\n"); }
  int Running() const;

  const SuperviseOptions& o_;
  std::vector<Child> children_;
  int signal_fd_ = -1;           // SIGCHLD
  int stop_pipe_[2] = {-1, -1};  // SIGINT and SIGTERM, from the process's signal watcher
  std::optional<ForwardStopSignals> forward_;
  sigset_t blocked_{}, previous_mask_{};
  bool mask_changed_ = false;
  std::optional<RankExit> first_failure_;
  // A rank that exited with a non-zero status, held for kSettle before it becomes the first
  // failure, in case a rank killed by a signal is reaped meanwhile (see kSettle).
  std::optional<RankExit> pending_failure_;
  std::optional<Clock::time_point> settle_until_;
  std::vector<RankStop> stopped_at_failure_;
  std::vector<RankExit> tolerated_;  // keep_going: ranks != 0 that failed
  std::vector<RankStop> stranded_;   // stopped when every other rank had ended; ended by us
  int interrupted_by_ = 0;
  bool stop_requested_ = false;
  int watch_fd_ = -1;                         // o_.watch_fd until on_watch says kForget
  std::optional<Clock::time_point> kill_at_;  // when stopping ranks get SIGKILL
};

Supervisor::~Supervisor() {
  // Only reached with ranks still running if starting failed: they must not outlive us.
  for (Child& c : children_) {
    if (c.running) {
      ::kill(-c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
    }
    c.out.Close();
    c.err.Close();
  }
  if (signal_fd_ >= 0) ::close(signal_fd_);
  forward_.reset();
  for (int fd : stop_pipe_)
    if (fd >= 0) ::close(fd);
  if (mask_changed_) ::sigprocmask(SIG_SETMASK, &previous_mask_, nullptr);
}

int Supervisor::Running() const {
  int n = 0;
  for (const Child& c : children_) n += c.running ? 1 : 0;
  return n;
}

Status Supervisor::Start() {
  sigemptyset(&blocked_);
  sigaddset(&blocked_, SIGCHLD);
  if (::sigprocmask(SIG_BLOCK, &blocked_, &previous_mask_) != 0)
    return InternalError("sigprocmask: " + ErrnoText(errno));
  mask_changed_ = true;
  signal_fd_ = ::signalfd(-1, &blocked_, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) return InternalError("signalfd: " + ErrnoText(errno));
  if (::pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    return InternalError("pipe: " + ErrnoText(errno));
  forward_.emplace(stop_pipe_[1]);
  children_.reserve(o_.ranks.size());
  for (const RankSpec& spec : o_.ranks) REEL_RETURN_IF_ERROR(Spawn(spec));
  watch_fd_ = o_.on_watch ? o_.watch_fd : -1;
  return Status::Ok();
}

Status Supervisor::Spawn(const RankSpec& spec) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings;
  std::map<std::string, size_t> overridden;
  for (const std::string& e : spec.environment) overridden[e.substr(0, e.find('='))] = 0;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    if (!overridden.count(entry.substr(0, entry.find('=')))) env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), spec.environment.begin(), spec.environment.end());
  std::vector<char*> envp, argv;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o_.command;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return InternalError("pipe: " + ErrnoText(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return InternalError("pipe: " + ErrnoText(errno));
  }
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return InternalError("pipe: " + ErrnoText(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_pipe[0], exec_pipe[1]})
      ::close(fd);
    return InternalError("fork: " + ErrnoText(err));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the supervisor died before prctl took effect
    sigset_t none;  // a rank starts as any program does: reel's own blocked signals not inherited
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::execvpe(argv[0], argv.data(), envp.data());
    const int err = errno;
    ssize_t ignored = ::write(exec_pipe[1], &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we might signal it
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  Child& c = children_.emplace_back();
  c.rank = spec.rank;
  c.pid = pid;
  c.running = true;
  const std::string prefix = "[rank " + std::to_string(spec.rank) + "] ";
  c.out = {out_pipe[0], o_.out_fd, prefix, {}};
  c.err = {err_pipe[0], o_.err_fd, prefix, {}};
  // The exec pipe closes on a successful exec and carries errno otherwise.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    ::waitpid(pid, nullptr, 0);
    c.running = false;
    return InvalidArgumentError("cannot run '" + o_.command[0] + "': " + ErrnoText(exec_errno));
  }
  for (int fd : {c.out.fd, c.err.fd}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return Status::Ok();
}

void Supervisor::Signal(int sig) {
  for (const Child& c : children_)
    if (c.running) ::kill(-c.pid, sig);
  // A stopped rank would hold SIGTERM or SIGINT pending forever (and we would wait for it, or
  // the grace period): let it run to handle it, as a shell's kill does for stopped jobs.
  if (sig == SIGTERM || sig == SIGINT)
    for (const Child& c : children_)
      if (c.running && c.stopped_by != 0) ::kill(-c.pid, SIGCONT);
}

void Supervisor::OnExit(Child& c, int status) {
  c.running = false;
  // Output written before the exit is already in the pipes: take it before closing them.
  c.out.Pump();
  c.err.Pump();
  c.out.Close();
  c.err.Close();
  RankExit e{c.rank, WIFSIGNALED(status),
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)};
  // Ended by us (EndStranded): the outcome names it as stopped, however it exited.
  if (e.ok() || interrupted_by_ != 0 || first_failure_ || stop_requested_ || IsStranded(c.rank))
    return;
  if (o_.keep_going && e.rank != 0) {
    tolerated_.push_back(e);
    Say("rank " + std::to_string(e.rank) + " " + e.Describe() + "; the other " +
        std::to_string(Running()) + " rank(s) go on (--keep-going)");
    return;
  }
  if (e.signaled) {
    Fail(e);
  } else if (Running() == 0) {
    Fail(pending_failure_.value_or(e));
  } else if (!pending_failure_) {
    pending_failure_ = e;
    settle_until_ = Clock::now() + kSettle;
  }
}

void Supervisor::StopOnRequest() {
  if (first_failure_ || interrupted_by_ != 0 || stop_requested_) return;
  if (pending_failure_) return Fail(*pending_failure_);  // it failed first
  stop_requested_ = true;
  char grace[32];
  std::snprintf(grace, sizeof grace, "%.1f", static_cast<double>(o_.grace.count()) / 1000.0);
  Say("stopping the " + std::to_string(Running()) + " rank(s) (SIGTERM, then SIGKILL after " +
      grace + " s)");
  Signal(SIGTERM);
  kill_at_ = Clock::now() + o_.grace;
}

void Supervisor::Fail(const RankExit& e) {
  first_failure_ = e;
  pending_failure_.reset();
  settle_until_.reset();
  // A stopped rank does not exit; the ranks waiting for it fail instead (their errors name it).
  // Name it here too: it is the likely cause.
  for (const Child& other : children_)
    if (other.running && other.stopped_by != 0)
      stopped_at_failure_.push_back({other.rank, other.stopped_by});
  const int others = Running();
  if (others == 0) {
    Say("rank " + std::to_string(e.rank) + " " + e.Describe());
    return;
  }
  char grace[32];
  std::snprintf(grace, sizeof grace, "%.1f", static_cast<double>(o_.grace.count()) / 1000.0);
  Say("rank " + std::to_string(e.rank) + " " + e.Describe() + WhileStopped(stopped_at_failure_) +
      "; stopping the other " + std::to_string(others) + " rank(s) (SIGTERM, then SIGKILL after " +
      grace + " s)");
  Signal(SIGTERM);
  kill_at_ = Clock::now() + o_.grace;
}

bool Supervisor::IsStranded(int rank) const {
  return std::any_of(stranded_.begin(), stranded_.end(),
                     [rank](const RankStop& s) { return s.rank == rank; });
}

// A stopped rank that every other rank ended without (they finished, or gave up on it and failed
// under keep_going) has nobody left to work with and nothing to continue it: without this,
// launch would wait for it forever. Only once: a stranded rank continues when it is signalled.
void Supervisor::EndStranded() {
  if (first_failure_ || pending_failure_ || interrupted_by_ != 0 || stop_requested_ ||
      !stranded_.empty())
    return;
  const int running = Running();
  if (running == 0 || running == static_cast<int>(children_.size())) return;
  for (const Child& c : children_)
    if (c.running && c.stopped_by == 0) return;
  for (const Child& c : children_)
    if (c.running) stranded_.push_back({c.rank, c.stopped_by});
  char grace[32];
  std::snprintf(grace, sizeof grace, "%.1f", static_cast<double>(o_.grace.count()) / 1000.0);
  Say(Stranded(stranded_) + "; ending " + (running == 1 ? "it" : "them") +
      " (SIGTERM, then SIGKILL after " + grace + " s)");
  Signal(SIGTERM);
  kill_at_ = Clock::now() + o_.grace;
}

void Supervisor::Reap() {
  // Ranks that ended since the last look, those killed by a signal first: when a rank is killed,
  // the ranks it leaves behind fail soon after with a status of their own (naming it), and if
  // both are seen at once the killed one is the first failure.
  std::vector<std::pair<Child*, int>> ended;
  for (Child& c : children_) {
    if (!c.running) continue;
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(c.pid, &status, WNOHANG | WUNTRACED | WCONTINUED)) == c.pid) {
      if (WIFSTOPPED(status)) {
        c.stopped_by = WSTOPSIG(status);
        Say("rank " + std::to_string(c.rank) + " " + RankStop{c.rank, c.stopped_by}.Describe());
      } else if (WIFCONTINUED(status)) {
        if (c.stopped_by != 0) Say("rank " + std::to_string(c.rank) + " continues");
        c.stopped_by = 0;
      } else {
        ended.emplace_back(&c, status);
        break;
      }
    }
  }
  std::stable_partition(ended.begin(), ended.end(),
                        [](const auto& e) { return WIFSIGNALED(e.second); });
  for (auto& [child, status] : ended) OnExit(*child, status);
}

SuperviseOutcome Supervisor::Wait() {
  while (Running() > 0) {
    std::vector<pollfd> fds{
        {signal_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}, {watch_fd_, POLLIN, 0}};
    std::vector<OutputPipe*> pipes;
    for (Child& c : children_)
      for (OutputPipe* p : {&c.out, &c.err})
        if (p->fd >= 0) {
          fds.push_back({p->fd, POLLIN, 0});
          pipes.push_back(p);
        }
    int timeout = -1;
    for (const auto& at : {kill_at_, settle_until_}) {
      if (!at) continue;
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*at - Clock::now());
      const int ms = static_cast<int>(std::max<int64_t>(0, left.count()));
      timeout = timeout < 0 ? ms : std::min(timeout, ms);
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      Say("poll: " + ErrnoText(errno) + "; killing the ranks");
      Signal(SIGKILL);
      kill_at_.reset();
    }
    if (pending_failure_ && Clock::now() >= *settle_until_) Fail(*pending_failure_);
    if (kill_at_ && Clock::now() >= *kill_at_) {
      Say("grace period over; SIGKILL to " + std::to_string(Running()) + " rank(s)");
      Signal(SIGKILL);
      kill_at_.reset();
    }
    for (size_t i = 3; n > 0 && i < fds.size(); ++i)
      if (fds[i].revents != 0) pipes[i - 3]->Pump();
    if (n > 0 && watch_fd_ >= 0 && fds[2].revents != 0) {
      const WatchVerdict v = o_.on_watch();
      if (v == WatchVerdict::kStop) StopOnRequest();
      if (v != WatchVerdict::kGoOn) watch_fd_ = -1;
    }
    if (n > 0 && fds[0].revents != 0) {
      signalfd_siginfo info;  // SIGCHLD: reaped below, whatever woke us
      while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      }
    }
    if (n > 0 && fds[1].revents != 0) {
      int sig = 0;
      while (::read(stop_pipe_[0], &sig, sizeof sig) == static_cast<ssize_t>(sizeof sig)) {
        if (pending_failure_) Fail(*pending_failure_);  // a failure before the signal wins
        if (interrupted_by_ == 0) interrupted_by_ = sig;
        Say("got " + SignalName(sig) + "; passing it to " + std::to_string(Running()) +
            " rank(s) and waiting for them");
        Signal(sig);
      }
    }
    Reap();
    EndStranded();
  }
  // A failure still settling when the last rank exited (the last one tolerated, --keep-going).
  if (pending_failure_) Fail(*pending_failure_);
  SuperviseOutcome outcome;
  outcome.first_failure = first_failure_;
  outcome.stopped_at_failure = stopped_at_failure_;
  outcome.tolerated = tolerated_;
  outcome.stranded = stranded_;
  outcome.interrupted_by = interrupted_by_;
  outcome.stopped_on_request = stop_requested_ && !first_failure_;
  const bool has_rank0 =
      std::any_of(o_.ranks.begin(), o_.ranks.end(), [](const RankSpec& r) { return r.rank == 0; });
  const bool stranded_fails =
      std::any_of(stranded_.begin(), stranded_.end(),
                  [this](const RankStop& s) { return !o_.keep_going || s.rank == 0; });
  if (first_failure_)
    outcome.exit_code = first_failure_->ExitCode();
  else if (interrupted_by_ != 0)
    outcome.exit_code = 130;  // as every interrupted reel command, on SIGINT or SIGTERM
  else if (stranded_fails)
    outcome.exit_code = 128 + stranded_.front().signal;
  else if (!has_rank0 && tolerated_.size() + stranded_.size() == o_.ranks.size())
    outcome.exit_code =
        tolerated_.empty() ? 128 + stranded_.front().signal : tolerated_.front().ExitCode();
  if (!tolerated_.empty()) {
    // Each named, the first one first: it is often the cause of the others' failures (a lost
    // parameter server) and of rank 0's exit code.
    std::string which;
    for (const RankExit& e : tolerated_)
      which += (which.empty() ? ": " : "; ") + std::string("rank ") + std::to_string(e.rank) + " " +
               e.Describe();
    Say(std::to_string(tolerated_.size()) + " rank(s) failed and were tolerated (--keep-going)" +
        which);
  }
  if (!stranded_.empty() && !stranded_fails)
    Say("tolerated (--keep-going): " + Stranded(stranded_));
  return outcome;
}

}  // namespace

std::string RankStop::Describe() const {
  return "was stopped by signal " + std::to_string(signal) + " (" + SignalName(signal) + ")";
}

std::string WhileStopped(const std::vector<RankStop>& stopped) {
  std::string text;
  for (const RankStop& s : stopped)
    text += (text.empty() ? " while rank " : " and rank ") + std::to_string(s.rank) + " " +
            s.Describe();
  return text;
}

std::string Stranded(const std::vector<RankStop>& stranded) {
  std::string text;
  for (const RankStop& s : stranded)
    text += (text.empty() ? "rank " : " and rank ") + std::to_string(s.rank) + " " + s.Describe();
  return text + " and every other rank ended without " + (stranded.size() == 1 ? "it" : "them");
}

std::string RankExit::Describe() const {
  if (!signaled) return "exited with status " + std::to_string(value);
  return "was killed by signal " + std::to_string(value) + " (" + SignalName(value) + ")";
}

Result<SuperviseOutcome> SuperviseRanks(const SuperviseOptions& options) {
  if (options.command.empty()) return InvalidArgumentError("no command to run");
  if (options.ranks.empty()) return InvalidArgumentError("no ranks to start");
  Supervisor supervisor(options);
  REEL_RETURN_IF_ERROR(supervisor.Start());
  return supervisor.Wait();
}

}  // namespace reel::cli
