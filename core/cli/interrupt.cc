#include "interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace reel::cli {
namespace {

std::atomic<bool> g_requested{false};

extern "C" void OnStopSignal(int) {
  g_requested.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second one ends the process at once
  std::signal(SIGTERM, SIG_DFL);
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
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

InterruptScope::~InterruptScope() {
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
}

bool InterruptScope::Requested() { return g_requested.load(); }

}  // namespace reel::cli
