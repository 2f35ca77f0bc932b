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
  previous_int_ = std::signal(SIGINT, OnStopSignal);
  previous_term_ = std::signal(SIGTERM, OnStopSignal);
}

InterruptScope::~InterruptScope() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
}

bool InterruptScope::Requested() { return g_requested.load(); }

}  // namespace reel::cli
