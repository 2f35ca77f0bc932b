// TimeBreakdown (reel/core/trainer.h): the part of the loop that is made slow is the one the
// breakdown names, on the result and in every logged window of metrics.jsonl.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include "reel/core/inproc.h"
#include "reel/core/trainer.h"
#include "train/testing.h"
#include "train/tiny_run.h"

namespace reel::core::time_breakdown_test {
namespace {

using testing::MemStorage;
using Rank = testing::TinyRank;
constexpr auto kNap = std::chrono::milliseconds(5);
constexpr double kNapSeconds = 0.005;

// Sleeps before every batch: a source that cannot keep up.
class SlowSource : public DataSource {
 public:
  explicit SlowSource(DataSource& inner) : inner_(inner) {}
  Result<Batch> Next() override {
    std::this_thread::sleep_for(kNap);
    return inner_.Next();
  }
  Status StartEpoch(int64_t epoch) override { return inner_.StartEpoch(epoch); }
  Result<std::string> Position() const override { return inner_.Position(); }
  Status Restore(std::string_view p) override { return inner_.Restore(p); }

 private:
  DataSource& inner_;
};

// Sleeps in every step: an exchange slower than the model.
class SlowOptimizer : public testing::TinySgd {
 public:
  Status Step(float lr) override {
    std::this_thread::sleep_for(kNap);
    return TinySgd::Step(lr);
  }
};

std::map<std::string, double> Parts(const TimeBreakdown& t) {
  std::map<std::string, double> m;
  for (const auto& [name, seconds] : t.parts()) m[name] = seconds;
  return m;
}

void ExpectConsistent(const TimeBreakdown& t) {
  double sum = 0.0;
  for (const auto& [name, seconds] : t.parts()) {
    EXPECT_GE(seconds, 0.0) << name;
    sum += seconds;
  }
  EXPECT_LE(sum, t.total);
}

// One rank's tiny run, with a slow source or a slow optimizer in place of its own.
Result<TrainResult> RunOneRank(MemStorage& storage, const TrainerOptions& o, bool slow_source,
                               bool slow_optimizer) {
  Rank r(0, 1, 5);
  SlowSource source(r.train);
  SlowOptimizer optimizer;
  auto comm = testing::SoloCommunicator();
  RankComponents c = r.components(comm.get());
  if (slow_source) c.train = &source;
  if (slow_optimizer) c.optimizer = &optimizer;
  return RunTrainer(o, c, storage);
}

TEST(TimeBreakdownTest, ASlowSourceMakesDataTheLargestPart) {
  MemStorage storage;
  TrainerOptions o = testing::TinyTrainerOptions();
  auto result = RunOneRank(storage, o, /*slow_source=*/true, /*slow_optimizer=*/false);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_STREQ(result->time.largest(), "data");
  EXPECT_GE(result->time.data, o.steps * kNapSeconds);
  ExpectConsistent(result->time);
}

TEST(TimeBreakdownTest, ASlowStepMakesUpdateTheLargestPart) {
  MemStorage storage;
  TrainerOptions o = testing::TinyTrainerOptions();
  auto result = RunOneRank(storage, o, /*slow_source=*/false, /*slow_optimizer=*/true);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_STREQ(result->time.largest(), "update");
  EXPECT_GE(result->time.update, o.steps * kNapSeconds);
  ExpectConsistent(result->time);
}

// Each logged window carries its own parts; together they are the run's (the final evaluation
// and checkpoint come after the last window).
TEST(TimeBreakdownTest, MetricsLogWindowsAddUpToTheResult) {
  MemStorage storage;
  TrainerOptions o = testing::TinyTrainerOptions();
  o.metrics_log = "mem://run/metrics.jsonl";
  auto result = RunOneRank(storage, o, /*slow_source=*/true, /*slow_optimizer=*/false);
  ASSERT_TRUE(result.ok()) << result.status();
  std::map<std::string, double> sums;
  int windows = 0;
  std::istringstream lines(storage.objects()["mem://run/metrics.jsonl"]);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"loss\"") == std::string::npos) continue;
    ++windows;
    for (const auto& [name, seconds] : result->time.parts()) {
      const std::string key = "\"" + std::string(name) + "_seconds\":";
      const size_t at = line.find(key);
      ASSERT_NE(at, std::string::npos) << key << " in " << line;
      sums[name] += std::stod(line.substr(at + key.size()));
    }
  }
  EXPECT_EQ(windows, o.steps / o.log_every_steps);
  const auto parts = Parts(result->time);
  for (const char* name : {"data", "compute", "update", "wait"})
    EXPECT_NEAR(sums[name], parts.at(name), 1e-4) << name;
  EXPECT_GE(sums["data"], o.steps * kNapSeconds);
}

// Ranks step together: the one whose data is slow makes the other wait for it each step.
TEST(TimeBreakdownTest, ARankWaitsForASlowerOne) {
  MemStorage storage;
  testing::TinyGroup group(2);
  auto& comms = group.comms;
  auto& ranks = group.ranks;
  SlowSource slow(ranks[1]->train);
  TrainerOptions o = testing::TinyTrainerOptions();
  o.steps = 12;
  std::vector<Result<TrainResult>> results(2, Result<TrainResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      RankComponents c = ranks[i]->components(comms[i].get());
      if (i == 1) c.train = &slow;
      results[i] = RunTrainer(o, c, storage);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(results[i].ok()) << results[i].status();
  // Compared across the ranks, not across one rank's parts: under a sanitizer on a loaded machine
  // a rank's compute or evaluation may outgrow the naps, but the slow rank's naps are still its
  // own data time and the other's wait, never the reverse.
  const TimeBreakdown& fast = results[0]->time;
  const TimeBreakdown& slower = results[1]->time;
  EXPECT_GE(slower.data, o.steps * kNapSeconds);
  EXPECT_GT(slower.data, fast.data);
  EXPECT_GT(fast.wait, slower.wait);
  ExpectConsistent(fast);
  ExpectConsistent(slower);
}

}  // namespace
}  // namespace reel::core::time_breakdown_test
