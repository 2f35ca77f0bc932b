#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace reel::core::tune {
namespace {

std::string Fixed(double v, int digits = 4) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  return buf;
}

std::string Csv(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string TrialName(int64_t config, int rung) {
  return "c" + std::to_string(config) + "/r" + std::to_string(rung);
}

}  // namespace

std::string MetricName(config::Objective::Metric metric, int top_k) {
  switch (metric) {
    case config::Objective::HIT_AT_1:
      return "Hit@1";
    case config::Objective::PERR:
      return "PERR";
    case config::Objective::MAP:
      return "mAP";
    default:
      return "GAP@" + std::to_string(top_k);
  }
}

double MetricOf(config::Objective::Metric metric, const EvalMetrics& eval) {
  switch (metric) {
    case config::Objective::HIT_AT_1:
      return eval.hit_at_1;
    case config::Objective::PERR:
      return eval.perr;
    case config::Objective::MAP:
      return eval.map;
    default:
      return eval.gap;
  }
}

Progress::Progress(std::ostream* out, bool tty, int verbosity, std::string metric_name,
                   int64_t planned)
    : out_(verbosity >= 1 ? out : nullptr),
      tty_(tty),
      verbosity_(verbosity),
      metric_name_(std::move(metric_name)),
      planned_(planned) {}

std::string Progress::Eta() const {
  const int done = finished_ + failed_;
  if (done == 0 || planned_ <= done) return "";
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return "  ETA " + Duration(elapsed / done * static_cast<double>(planned_ - done));
}

void Progress::Draw() {
  if (!out_ || !tty_) return;
  *out_ << "\r\033[Ktrials: " << running_ << " running, " << finished_ << " finished, " << failed_
        << " failed of ~" << planned_
        << (best_ ? "  best " + metric_name_ + " " + Fixed(*best_) : std::string()) << Eta()
        << std::flush;
}

void Progress::Started(const TrialSpec& t, int attempt) {
  ++running_;
  if (out_ && !tty_ && verbosity_ >= 2) {
    *out_ << "trial " << TrialName(t.config, t.rung) << " started (budget " << t.budget
          << (attempt > 1 ? ", attempt " + std::to_string(attempt) : std::string()) << ")\n";
  }
  Draw();
}

void Progress::Ended(const TuneRow& row, bool interrupted) {
  --running_;
  if (!interrupted) (row.ok ? finished_ : failed_)++;
  // The best of the highest rung reached, as the results rank them.
  if (row.ok &&
      (!best_ || row.rung > best_rung_ || (row.rung == best_rung_ && row.metric > *best_))) {
    best_ = row.metric;
    best_rung_ = row.rung;
  }
  if (out_ && !tty_) {
    *out_ << "trial " << TrialName(row.config, row.rung) << " (budget " << row.budget << ") ";
    if (interrupted)
      *out_ << "interrupted";
    else if (row.ok)
      *out_ << metric_name_ << " " << Fixed(row.metric);
    else
      *out_ << "FAILED: " << row.error;
    *out_ << " in " << Duration(row.seconds) << "  [" << running_ << " running, " << finished_
          << " finished, " << failed_ << " failed"
          << (best_ ? ", best " + Fixed(*best_) : std::string()) << Eta() << "]\n";
  }
  Draw();
}

void Progress::Finish() {
  if (out_ && tty_) *out_ << "\n";
}

void RankRows(TuneResult& r) {
  // Within rungs, highest first: a metric after a short budget is not comparable with one after
  // the full budget (ASHA, Li et al. 2020, returns the best of the highest rung reached).
  std::stable_sort(r.rows.begin(), r.rows.end(), [](const TuneRow& a, const TuneRow& b) {
    if (a.ok != b.ok) return a.ok;
    if (!a.ok) return std::tie(a.config, a.rung) < std::tie(b.config, b.rung);
    if (a.rung != b.rung) return a.rung > b.rung;
    if (a.metric != b.metric) return a.metric > b.metric;
    return a.config < b.config;
  });
  r.best.reset();
  if (!r.rows.empty() && r.rows.front().ok) r.best = 0;
}

std::vector<int> RanksWithinRungs(const TuneResult& r) {
  std::vector<int> ranks;
  int rank = 0;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    if (!r.rows[i].ok) {
      ranks.push_back(0);
      continue;
    }
    if (i == 0 || r.rows[i].rung != r.rows[i - 1].rung) rank = 0;
    ranks.push_back(++rank);
  }
  return ranks;
}

std::string ResultsCsv(const TuneResult& r) {
  std::ostringstream out;
  out << "rank,trial,config,rung,budget";
  const std::vector<std::pair<std::string, std::string>>* names = nullptr;
  for (const TuneRow& row : r.rows)
    if (!row.params.empty()) names = &row.params;
  if (names)
    for (const auto& p : *names) out << "," << Csv(p.first);
  out << ",status," << Csv(r.metric_name)
      << ",gap,hit_at_1,perr,map,steps,seconds,attempts,error,dir\n";
  const std::vector<int> ranks = RanksWithinRungs(r);
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const TuneRow& row = r.rows[i];
    out << (row.ok ? std::to_string(ranks[i]) : std::string()) << ","
        << TrialName(row.config, row.rung) << "," << row.config << "," << row.rung << ","
        << row.budget;
    for (const auto& p : row.params) out << "," << Csv(p.second);
    out << "," << (row.ok ? "ok" : "failed") << ","
        << (row.ok ? Fixed(row.metric, 6) : std::string()) << ","
        << (row.ok ? Fixed(row.eval.gap, 6) + "," + Fixed(row.eval.hit_at_1, 6) + "," +
                         Fixed(row.eval.perr, 6) + "," + Fixed(row.eval.map, 6)
                   : std::string(",,,"))
        << "," << row.steps << "," << Fixed(row.seconds, 3) << "," << row.attempts << ","
        << Csv(row.error) << "," << Csv(row.dir) << "\n";
  }
  return out.str();
}

}  // namespace reel::core::tune

namespace reel::core {

std::string FormatTuneTable(const TuneResult& r, size_t max_rows) {
  std::ostringstream out;
  out << "rank  trial        budget  " << r.metric_name << "    time    params\n";
  const std::vector<int> ranks = tune::RanksWithinRungs(r);
  size_t shown = 0;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const TuneRow& row = r.rows[i];
    if (shown++ == max_rows) {
      out << "... " << (r.rows.size() - max_rows) << " more rows in " << r.results_csv << "\n";
      break;
    }
    char head[96];
    std::snprintf(head, sizeof head, "%-5s %-12s %6lld  %-9s %6.1fs  ",
                  row.ok ? std::to_string(ranks[i]).c_str() : "-",
                  tune::TrialName(row.config, row.rung).c_str(), static_cast<long long>(row.budget),
                  row.ok ? tune::Fixed(row.metric).c_str() : "FAILED", row.seconds);
    out << head;
    for (size_t i = 0; i < row.params.size(); ++i)
      out << (i ? " " : "") << row.params[i].first << "=" << row.params[i].second;
    if (!row.ok) out << "  (" << row.error << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace reel::core
