// Progress lines (see progress.h).
#include "train/progress.h"

#include <cmath>
#include <cstdio>

namespace reel::core {
namespace {

std::string Duration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return "?";
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buf;
}

}  // namespace

std::string Progress::Format(const ProgressSnapshot& s) {
  char buf[256];
  std::string step = std::to_string(s.step);
  if (s.total_steps > 0) step += "/" + std::to_string(s.total_steps);
  // The whole job's rate, then this rank's own when there are several.
  char worker[64] = "";
  if (s.worker_examples_per_sec >= 0)
    std::snprintf(worker, sizeof worker, " (this worker %.1f)", s.worker_examples_per_sec);
  std::snprintf(buf, sizeof buf, "epoch %lld  step %s  %.1f ex/s%s  loss %.4f  lr %.3g  ETA %s",
                static_cast<long long>(s.epoch), step.c_str(), s.examples_per_sec, worker, s.loss,
                s.lr, Duration(s.eta_seconds).c_str());
  return buf;
}

bool Progress::Due() const {
  if (out_ == nullptr || !tty_ || verbosity_ < 1) return false;
  return !live_ || std::chrono::steady_clock::now() - last_draw_ >= std::chrono::milliseconds(200);
}

void Progress::Tick(const ProgressSnapshot& s) {
  if (!Due()) return;
  auto now = std::chrono::steady_clock::now();
  last_draw_ = now;
  *out_ << "\r\033[K" << Format(s) << std::flush;
  live_ = true;
}

void Progress::Log(const ProgressSnapshot& s) {
  if (out_ == nullptr || verbosity_ < 1) return;
  if (tty_) {
    if (verbosity_ >= 2) Note(Format(s), 2);
    return;
  }
  *out_ << Format(s) << "\n" << std::flush;
}

void Progress::Note(const std::string& line, int level) {
  if (out_ == nullptr || verbosity_ < level) return;
  ClearLive();
  *out_ << line << "\n" << std::flush;
}

void Progress::Finish() { ClearLive(); }

void Progress::ClearLive() {
  if (live_ && out_ != nullptr) *out_ << "\r\033[K" << std::flush;
  live_ = false;
}

}  // namespace reel::core
