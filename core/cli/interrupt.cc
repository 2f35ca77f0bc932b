#include "interrupt.h"

#include <semaphore.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>

namespace reel::cli {
namespace {

std::atomic<bool> g_requested{false};
std::atomic<bool> g_polled{false};   // work that stops cleanly is polling: it owns the stop
std::atomic<bool> g_closing{false};  // the scope is ending: the watchdog leaves
sem_t g_wake;                        // posted by the handler (async-signal-safe) and the scope

extern "C" void OnStopSignal(int) {
  g_requested.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second one ends the process at once
  std::signal(SIGTERM, SIG_DFL);
  sem_post(&g_wake);
}

// Only async-signal-safe calls: write and _exit.
extern "C" void ExitInterrupted(int sig) {
  static constexpr char kInt[] = "reel: interrupted (SIGINT)\n";
  static constexpr char kTerm[] = "reel: interrupted (SIGTERM)\n";
  const bool term = sig == SIGTERM;
  ssize_t written = ::write(2, term ? kTerm : kInt, term ? sizeof(kTerm) - 1 : sizeof(kInt) - 1);
  (void)written;
  ::_exit(130);
}

}  // namespace

void ExitOnInterrupt() {
  std::signal(SIGINT, ExitInterrupted);
  std::signal(SIGTERM, ExitInterrupted);
}

InterruptScope::InterruptScope() {
  g_requested.store(false);
  g_polled.store(false);
  g_closing.store(false);
  sem_init(&g_wake, 0, 0);
  watchdog_ = std::thread([this] { Watch(); });
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

InterruptScope::~InterruptScope() {
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  g_closing.store(true);
  sem_post(&g_wake);
  watchdog_.join();
  sem_destroy(&g_wake);
}

void InterruptScope::Watch() {
  while (sem_wait(&g_wake) != 0) {
  }
  if (g_closing.load() || !g_requested.load()) return;
  // Gives work that polls kGrace to start doing so; the scope ending also ends the wait.
  timespec until{};
  clock_gettime(CLOCK_REALTIME, &until);
  const auto grace = std::chrono::nanoseconds(kGrace).count();
  until.tv_sec += static_cast<time_t>(grace / 1000000000);
  until.tv_nsec += static_cast<long>(grace % 1000000000);
  if (until.tv_nsec >= 1000000000) {
    until.tv_sec += 1;
    until.tv_nsec -= 1000000000;
  }
  while (sem_timedwait(&g_wake, &until) != 0 && errno == EINTR) {
  }
  if (g_closing.load() || g_polled.load()) return;
  static constexpr char kMessage[] =
      "reel: interrupted where the work cannot stop cleanly (forming the group, opening data or "
      "evaluating); ending now\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  std::_Exit(130);
}

bool InterruptScope::Requested() { return g_requested.load(); }

bool InterruptScope::Poll() {
  g_polled.store(true);
  return g_requested.load();
}

}  // namespace reel::cli
