#include "interrupt.h"

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

}  // namespace

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
