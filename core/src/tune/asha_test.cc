// ASHA as Li et al. define it: rungs counted down from the full budget, a promoted trial that
// continues one schedule planned for the full budget, results ranked within rungs, and a base
// config checked once before any trial.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "reel/core/tune.h"
#include "report.h"
#include "search.h"

namespace reel::core {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(AshaRungsTest, CountDownFromTheFullBudget) {
  using V = std::vector<int64_t>;
  // R = 100, eta = 3: 100, 33.3, 11.1 (the default min_budget, R / eta^2 = 11): all reachable.
  EXPECT_EQ(tune::RungBudgets(11, 100, 3), (V{11, 33, 100}));
  EXPECT_EQ(tune::RungBudgets(1, 100, 3), (V{1, 4, 11, 33, 100}));
  EXPECT_EQ(tune::RungBudgets(1, 9, 3), (V{1, 3, 9}));
  EXPECT_EQ(tune::RungBudgets(2, 9, 3), (V{3, 9}));  // 1 < min_budget 2
  EXPECT_EQ(tune::RungBudgets(100, 100, 3), (V{100}));
  EXPECT_EQ(tune::RungBudgets(1, 10, 2), (V{1, 3, 5, 10}));  // 1.25, 2.5, 5, 10 rounded
}

constexpr char kSearch[] = R"(
  base {
    data { name: "fake" }
    eval_data { name: "fake" }
    model { name: "fake" }
    trainer { steps: 27 learning_rate { base: 0.1 schedule: "cosine" } }
  }
  dimension { field: "trainer.learning_rate.base" values: ["0.1", "0.2", "0.3", "0.4",
                                                            "0.5", "0.6", "0.7", "0.8", "0.9"] }
  search { algorithm: ASHA trials: 9 seed: 2 eta: 3 }
  execution { parallel: 1 }
)";

std::string AshaScratch(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("asha_" + name);
  fs::remove_all(p);
  return p.string();
}

// Every trial's config as the runner got it; its metric grows with the learning rate and budget.
struct Recorder {
  std::mutex mu;
  std::vector<config::RunConfig> seen;
  TrialRunner Runner() {
    return [this](const TrialRequest& req) -> Result<TrialRun> {
      REEL_ASSIGN_OR_RETURN(ConfigFile cfg, ParseConfig(req.config_text, "trial"));
      const config::Trainer& t = cfg.config.trainer();
      std::ofstream(req.dir + "/checkpoints/ckpt-" + std::to_string(1000 + t.steps()) + ".reelckpt")
          << t.steps();
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(cfg.config);
      TrialRun run;
      run.steps = t.steps();
      run.eval.gap = t.learning_rate().base() * static_cast<double>(t.steps()) / 27;
      return run;
    };
  }
};

TEST(AshaTest, EveryRungPlansTheScheduleForTheFullBudgetAndBestIsFromTheTopRung) {
  auto f = ParseTuneConfig(kSearch, "search.pbtxt");
  ASSERT_TRUE(f.ok()) << f.status();
  Recorder rec;
  TuneOptions o;
  o.workdir = AshaScratch("schedule");
  auto r = RunTune(*f, o, rec.Runner());
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<int64_t> budgets;
  for (const config::RunConfig& c : rec.seen) {
    budgets.insert(c.trainer().steps());
    EXPECT_EQ(c.trainer().learning_rate().total_steps(), 27)
        << "a trial of " << c.trainer().steps() << " steps must anneal over the full 27";
  }
  EXPECT_EQ(budgets, (std::set<int64_t>{3, 9, 27}));  // default min_budget 27 / 9
  ASSERT_TRUE(r->best.has_value());
  const TuneRow& best = r->rows[*r->best];
  EXPECT_EQ(best.rung, 2);
  EXPECT_EQ(best.budget, 27);
  std::ifstream in(r->best_config);
  std::stringstream text;
  text << in.rdbuf();
  auto cfg = ParseConfig(text.str(), r->best_config);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->config.trainer().steps(), 27);
  EXPECT_EQ(cfg->config.trainer().learning_rate().total_steps(), 27);
}

TEST(AshaTest, ABaseThatPlansItsOwnScheduleKeepsIt) {
  std::string text = kSearch;
  text.replace(text.find("schedule: \"cosine\""), 18, "schedule: \"cosine\" total_steps: 40");
  auto f = ParseTuneConfig(text, "search.pbtxt");
  ASSERT_TRUE(f.ok()) << f.status();
  Recorder rec;
  TuneOptions o;
  o.workdir = AshaScratch("own_schedule");
  ASSERT_TRUE(RunTune(*f, o, rec.Runner()).ok());
  for (const config::RunConfig& c : rec.seen)
    EXPECT_EQ(c.trainer().learning_rate().total_steps(), 40);
}

TEST(AshaTest, RowsRankWithinRungsAndTheBestIsFromTheHighestRungReached) {
  TuneResult r;
  auto row = [](int64_t config, int rung, double metric, bool ok) {
    TuneRow t;
    t.config = config;
    t.rung = rung;
    t.budget = rung == 0 ? 3 : 9;
    t.metric = metric;
    t.ok = ok;
    return t;
  };
  // A short-budget row with the highest number must not be reported best.
  r.rows = {row(0, 0, 0.9, true), row(1, 0, 0.4, true), row(1, 1, 0.5, true), row(2, 1, 0.6, true),
            row(3, 0, 0, false)};
  tune::RankRows(r);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.rows[*r.best].config, 2);
  EXPECT_EQ(r.rows[*r.best].rung, 1);
  std::vector<std::pair<int64_t, int>> order;
  for (const TuneRow& t : r.rows) order.emplace_back(t.config, t.rung);
  EXPECT_EQ(order, (std::vector<std::pair<int64_t, int>>{{2, 1}, {1, 1}, {0, 0}, {1, 0}, {3, 0}}));
  EXPECT_EQ(tune::RanksWithinRungs(r), (std::vector<int>{1, 2, 1, 2, 0}));
  r.results_csv = "results.csv";
  const std::string csv = tune::ResultsCsv(r);
  EXPECT_THAT(csv, HasSubstr("\n1,c2/r1,"));
  EXPECT_THAT(csv, HasSubstr("\n1,c0/r0,"));
  EXPECT_THAT(csv, HasSubstr("\n,c3/r0,"));
}

TEST(AshaTest, ABadBaseFailsOnceBeforeAnyTrialAndLeavesNoJournal) {
  auto f = ParseTuneConfig(kSearch, "search.pbtxt");
  ASSERT_TRUE(f.ok()) << f.status();
  Recorder rec;
  TuneOptions o;
  o.workdir = AshaScratch("bad_base");
  int checks = 0;
  o.check_config = [&](const ConfigFile& base) {
    ++checks;
    EXPECT_EQ(base.config.trainer().steps(), 27);
    return NotFoundError("no file matches 'missing/*.tfrecord'");
  };
  auto r = RunTune(*f, o, rec.Runner());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("the base config: no file matches"));
  EXPECT_EQ(checks, 1);
  EXPECT_TRUE(rec.seen.empty());
  EXPECT_FALSE(fs::exists(o.workdir + "/journal.jsonl"));
}

}  // namespace
}  // namespace reel::core
