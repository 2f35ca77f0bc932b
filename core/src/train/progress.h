// Progress reporting for the trainer: a live line redrawn in place on a terminal, plain lines
// otherwise, and nothing but errors in quiet mode. Thread-safety: rank 0's thread only.
#ifndef REEL_CORE_SRC_TRAIN_PROGRESS_H_
#define REEL_CORE_SRC_TRAIN_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace reel::core {

struct ProgressSnapshot {
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t total_steps = 0;                // 0 when unknown (epoch budget, first epoch)
  double examples_per_sec = 0.0;          // the whole job's (every training rank's examples)
  double worker_examples_per_sec = -1.0;  // this rank's own; < 0: not shown (one rank)
  double loss = 0.0;
  double lr = 0.0;
  double eta_seconds = -1.0;  // < 0: unknown
};

class Progress {
 public:
  Progress(std::ostream* out, bool tty, int verbosity)
      : out_(out), tty_(tty), verbosity_(verbosity) {}

  // Called every step; draws the live line at most ~5 times a second on a terminal.
  void Tick(const ProgressSnapshot& s);
  // Whether a Tick() now would draw (a snapshot that costs something is taken only then).
  bool Due() const;
  // Called every log_every_steps; prints a plain line when not on a terminal.
  void Log(const ProgressSnapshot& s);
  // A line of its own (evaluation results, checkpoints); `level` 1 normal, 2 verbose.
  void Note(const std::string& line, int level = 1);
  // Ends the live line.
  void Finish();

  static std::string Format(const ProgressSnapshot& s);

 private:
  void ClearLive();
  std::ostream* out_;
  bool tty_;
  int verbosity_;
  bool live_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_PROGRESS_H_
