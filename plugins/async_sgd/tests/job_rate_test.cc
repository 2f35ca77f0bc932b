// The whole job's examples/s of an async run, under the trainer, ranks as threads: the sum of
// what every worker's applied pushes carried, not the lead's rate times the workers, and the same
// in the live line, the log lines, the metrics log and on_event. The figures are checked against
// each other and against known example counts, never against a speed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <map>
#include <sstream>

#include "ranks.h"

namespace reel::async_sgd::job_rate_test {
namespace {

using core::testing::TinySource;

constexpr int kWorld = 3, kLead = 1, kOther = 2, kDim = 6, kClasses = 12, kBatch = 4;
// The lead trains 3 batches, the other worker 12, all before the lead's first step.
constexpr int kLeadVideos = 12, kOtherVideos = 48;

// `inner`'s batches; once it runs out (its epoch's end), `ran_out` is set.
class SignalAtEnd : public DataSource {
 public:
  SignalAtEnd(TinySource inner, std::promise<void>& ran_out)
      : inner_(std::move(inner)), ran_out_(ran_out) {}
  Result<Batch> Next() override {
    Result<Batch> b = inner_.Next();
    if (!b.ok() && !signalled_) {
      signalled_ = true;
      ran_out_.set_value();
    }
    return b;
  }
  Status StartEpoch(int64_t epoch) override { return inner_.StartEpoch(epoch); }
  Result<std::string> Position() const override { return inner_.Position(); }
  Status Restore(std::string_view p) override { return inner_.Restore(p); }

 private:
  TinySource inner_;
  std::promise<void>& ran_out_;
  bool signalled_ = false;
};

// `inner`'s batches, the first once `go` is set.
class WaitFirst : public DataSource {
 public:
  WaitFirst(TinySource inner, std::future<void>& go) : inner_(std::move(inner)), go_(go) {}
  Result<Batch> Next() override {
    if (!went_) {
      if (go_.wait_for(std::chrono::minutes(1)) != std::future_status::ready)
        return DeadlineExceededError("the other worker did not finish within a minute");
      went_ = true;
    }
    return inner_.Next();
  }
  Status StartEpoch(int64_t epoch) override { return inner_.StartEpoch(epoch); }
  Result<std::string> Position() const override { return inner_.Position(); }
  Status Restore(std::string_view p) override { return inner_.Restore(p); }

 private:
  TinySource inner_;
  std::future<void>& go_;
  bool went_ = false;
};

double Field(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  return std::stod(line.substr(at + key.size() + 4));
}

// Two workers of unequal speed: the other worker trains all its 48 examples while the lead waits
// for its first batch, then the lead trains its 12 in one logging window. Every push reached the
// server before the lead's first step, so at the lead's step s the job has trained 48 + 4s
// examples in the window, the lead 4s: the whole job's rate is (48 + 4s) / 4s times the lead's in
// every output (5 at the log line of step 3); before, the live line gave twice the lead's and the
// log line and the metrics log the lead's alone.
TEST(AsyncJobRate, IsTheSumOfWhatEveryWorkersPushesCarriedInEveryOutput) {
  core::testing::MemStorage storage;
  std::promise<void> ran_out;
  std::future<void> go = ran_out.get_future();
  std::ostringstream progress;
  std::vector<core::TrainEvent> events;
  std::vector<Result<core::TrainResult>> results =
      OnRankThreads(kWorld, [&](int r, auto& comm) -> Result<core::TrainResult> {
        REEL_ASSIGN_OR_RETURN(
            Options o, ParseOptions(AsyncOptions(), {{"rule", "sgd"}, {"timeout_ms", "60000"}}));
        REEL_ASSIGN_OR_RETURN(auto opt, AsyncOptimizer::Create(o, {r, kWorld}));
        const bool serves = opt->IsServerOnly();
        REEL_ASSIGN_OR_RETURN(auto group,
                              comm->Split(serves ? 1 : 0, r, DeadlineIn(std::chrono::minutes(1))));
        SignalAtEnd other(TinySource(kOtherVideos, kDim, kClasses, kBatch, 7, {0, 1}), ran_out);
        WaitFirst lead(TinySource(kLeadVideos, kDim, kClasses, kBatch, 7, {0, 1}), go);
        DataSource* train = serves        ? nullptr
                            : r == kOther ? static_cast<DataSource*>(&other)
                                          : &lead;
        return TrainTinyRank(*opt, *comm, *group, train, 0, kDim, kClasses, storage, nullptr,
                             [&](core::TrainerOptions& t) {
                               t.epochs = 1;
                               t.log_every_steps = 3;
                               t.metrics_log = "mem://async_rate/metrics.jsonl";
                               t.progress = &progress;  // the lead's only
                               t.tty = true;            // the live line, and the log lines as notes
                               t.verbosity = 2;
                               t.on_event = [&](const core::TrainEvent& e) {
                                 if (e.kind == core::TrainEvent::Kind::kLog) events.push_back(e);
                               };
                             });
      });
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
  EXPECT_EQ(results[kLead]->examples, kLeadVideos + kOtherVideos);
  auto ratio = [](int64_t step) {
    return static_cast<double>(kOtherVideos + kBatch * step) / (kBatch * step);
  };
  const std::vector<core::testing::RateLine> lines = core::testing::RateLines(progress.str());
  bool live = false;
  std::map<int64_t, double> logged;  // step -> the job's rate in its log line
  for (const core::testing::RateLine& l : lines) {
    // Up to the rounding of both to 0.1.
    EXPECT_NEAR(l.job, ratio(l.step) * l.worker, 0.05 * (1 + ratio(l.step)) + 1e-9)
        << "step " << l.step << (l.live ? " (live)" : "") << "\n"
        << progress.str();
    live = live || l.live;
    if (!l.live) logged[l.step] = l.job;
  }
  EXPECT_TRUE(live) << progress.str();
  ASSERT_EQ(logged.size(), 1u) << progress.str();
  ASSERT_TRUE(logged.count(3)) << progress.str();
  std::istringstream log(storage.objects()["mem://async_rate/metrics.jsonl"]);
  int train_lines = 0;
  for (std::string line; std::getline(log, line);) {
    if (line.find("\"loss\"") == std::string::npos) continue;
    ++train_lines;
    const double job = Field(line, "examples_per_sec");
    const double worker = Field(line, "worker_examples_per_sec");
    EXPECT_EQ(Field(line, "step"), 3.0) << line;
    EXPECT_NEAR(job, ratio(3) * worker, 1e-9 * job) << line;
    EXPECT_NEAR(logged[3], job, 0.05 + 1e-9) << line;
    ASSERT_EQ(events.size(), 1u);
    EXPECT_NEAR(events[0].examples_per_sec, job, 1e-12 * job);
    EXPECT_NEAR(events[0].worker_examples_per_sec, worker, 1e-12 * job);
  }
  EXPECT_EQ(train_lines, 1);
}

}  // namespace
}  // namespace reel::async_sgd::job_rate_test
