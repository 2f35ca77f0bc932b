#include "interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>
#include <mutex>
#include <thread>

namespace reel::cli {
namespace {
// A namespace of their own: the command's files are compiled as one unity source (measure.cc has
// a Mode too).
namespace stop_signals {

using Clock = std::chrono::steady_clock;

enum class Mode { kExit, kRequest, kIgnore, kForward };

std::atomic<Mode> g_mode{Mode::kExit};
std::atomic<int> g_forward_fd{-1};
std::atomic<bool> g_requested{false};
std::atomic<bool> g_polled{false};  // work that stops cleanly is polling: it owns the stop
std::atomic<int> g_scope{0};        // which scope a request and its grace belong to
std::atomic<pthread_t> g_watcher{};
std::once_flag g_started;

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void Say(const char* text, size_t n) { (void)!::write(STDERR_FILENO, text, n); }
#define REEL_SAY(literal) Say(literal, sizeof(literal) - 1)

// A thread that did not block the signals (one started before ExitOnInterrupt, in a test or a
// host) runs this: it only passes the signal to the watcher, keeping what it said of its origin.
extern "C" void PassToWatcher(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  sigval value{};
  value.sival_int = info != nullptr ? info->si_code : SI_USER;
  pthread_sigqueue(g_watcher.load(), sig, value);
  errno = saved_errno;
}

// Typed on a terminal: the kernel's line discipline sends SIGINT with si_code SI_KERNEL; kill,
// srun, mpirun and `reel launch` send SI_USER.
bool FromTerminal(int sig, const siginfo_t& info) {
  int code = info.si_code;
  if (code == SI_QUEUE && info.si_pid == ::getpid()) code = info.si_value.sival_int;
  return sig == SIGINT && code == SI_KERNEL;
}

constexpr Clock::time_point kNoGrace = Clock::time_point::max();

// What a signal does in a scope. Returns when the grace for work that does not poll ends, if it
// starts now (else kNoGrace).
Clock::time_point Request(int sig, const siginfo_t& info) {
  if (!g_requested.exchange(true)) return Clock::now() + InterruptScope::kGrace;
  if (FromTerminal(sig, info)) {
    REEL_SAY("reel: interrupted again from the terminal; ending now\n");
    ::_exit(130);
  }
  REEL_SAY(
      "reel: already stopping: finishing the step and the checkpoint (SIGKILL ends at once)\n");
  return kNoGrace;
}

void Act(int sig, const siginfo_t& info, Clock::time_point* grace_ends, int* grace_scope) {
  switch (g_mode.load()) {
    case Mode::kExit:
      if (sig == SIGTERM)
        REEL_SAY("reel: interrupted (SIGTERM)\n");
      else
        REEL_SAY("reel: interrupted (SIGINT)\n");
      ::_exit(130);
    case Mode::kRequest:
      if (const Clock::time_point ends = Request(sig, info); ends != kNoGrace) {
        *grace_ends = ends;
        *grace_scope = g_scope.load();
      }
      return;
    case Mode::kForward:
      (void)!::write(g_forward_fd.load(), &sig, sizeof sig);
      return;
    case Mode::kIgnore:
      return;
  }
}

[[noreturn]] void Watch() {
  // Every signal blocked here: one this thread does not wait for is left to the threads that
  // take it (`reel launch` reads SIGCHLD from a signalfd, which sees only signals no thread takes).
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  const sigset_t set = StopSignals();
  Clock::time_point grace_ends = kNoGrace;
  int grace_scope = 0;
  while (true) {
    siginfo_t info{};
    int sig;
    if (grace_ends != kNoGrace) {
      const auto left = std::max(Clock::duration::zero(), grace_ends - Clock::now());
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      const timespec timeout{static_cast<time_t>(ns / 1000000000),
                             static_cast<long>(ns % 1000000000)};
      sig = sigtimedwait(&set, &info, &timeout);
    } else {
      sig = sigwaitinfo(&set, &info);
    }
    if (sig > 0) {
      Act(sig, info, &grace_ends, &grace_scope);
      continue;
    }
    if (errno != EAGAIN || grace_ends == kNoGrace || Clock::now() < grace_ends) continue;  // EINTR
    grace_ends = kNoGrace;
    if (g_mode.load() == Mode::kRequest && g_scope.load() == grace_scope && !g_polled.load()) {
      REEL_SAY(
          "reel: interrupted where the work cannot stop cleanly (forming the group, opening data "
          "or evaluating); ending now\n");
      std::_Exit(130);
    }
  }
}

// Blocks the signals in the calling thread and, once per process, starts the watcher.
void EnsureWatcher() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::call_once(g_started, [] {
    std::thread watcher(Watch);
    g_watcher.store(watcher.native_handle());
    watcher.detach();  // it lives as long as the process
    struct sigaction action {};
    action.sa_sigaction = PassToWatcher;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  });
}

}  // namespace stop_signals
}  // namespace

void ExitOnInterrupt() {
  stop_signals::g_mode.store(stop_signals::Mode::kExit);
  stop_signals::EnsureWatcher();
}

InterruptScope::InterruptScope() {
  stop_signals::EnsureWatcher();
  stop_signals::g_requested.store(false);
  stop_signals::g_polled.store(false);
  stop_signals::g_scope.fetch_add(1);
  stop_signals::g_mode.store(stop_signals::Mode::kRequest);
}

InterruptScope::~InterruptScope() { stop_signals::g_mode.store(stop_signals::Mode::kIgnore); }

bool InterruptScope::Requested() { return stop_signals::g_requested.load(); }

bool InterruptScope::Poll() {
  stop_signals::g_polled.store(true);
  return stop_signals::g_requested.load();
}

ForwardStopSignals::ForwardStopSignals(int fd) {
  stop_signals::EnsureWatcher();
  stop_signals::g_forward_fd.store(fd);
  stop_signals::g_mode.store(stop_signals::Mode::kForward);
}

ForwardStopSignals::~ForwardStopSignals() {
  stop_signals::g_mode.store(stop_signals::Mode::kExit);
  stop_signals::g_forward_fd.store(-1);
}

}  // namespace reel::cli
