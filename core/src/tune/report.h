// What a search shows: the live progress line, the results table, results.csv and best.pbtxt.
//
// Thread-safety: Progress is used by the scheduler's thread only; the rest are functions.
#ifndef REEL_CORE_SRC_TUNE_REPORT_H_
#define REEL_CORE_SRC_TUNE_REPORT_H_

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "reel/core/tune.h"
#include "search.h"

namespace reel::core::tune {

// Trials running / finished / failed, the best metric so far and an ETA: one line redrawn in
// place on a terminal, else a plain line per trial that starts or ends.
class Progress {
 public:
  Progress(std::ostream* out, bool tty, int verbosity, std::string metric_name, int64_t planned);
  void Started(const TrialSpec& t, int attempt);
  void Ended(const TuneRow& row, bool interrupted);
  void Finish();  // ends a redrawn line
  int running() const { return running_; }

 private:
  void Draw();
  std::string Eta() const;
  std::ostream* out_;
  bool tty_;
  int verbosity_;
  std::string metric_name_;
  int64_t planned_;
  int running_ = 0, finished_ = 0, failed_ = 0;
  std::optional<double> best_;  // of rung best_rung_, the highest with a result
  int best_rung_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Sorts rows by rung, highest first, and best first within a rung (failed rows last), and sets
// result.best: the best trial of the highest rung reached.
void RankRows(TuneResult& result);
// Each row's rank within its rung, 1 first (0 for failed rows), for rows as RankRows leaves them.
std::vector<int> RanksWithinRungs(const TuneResult& result);
// results.csv: a header line, then one line per row (fields quoted as RFC 4180 where needed).
std::string ResultsCsv(const TuneResult& result);
// "GAP@20", "Hit@1", "PERR", "mAP".
std::string MetricName(config::Objective::Metric metric, int top_k);
double MetricOf(config::Objective::Metric metric, const EvalMetrics& eval);

}  // namespace reel::core::tune

#endif  // REEL_CORE_SRC_TUNE_REPORT_H_
