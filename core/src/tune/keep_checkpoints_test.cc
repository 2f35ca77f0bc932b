// What a search leaves on disk (execution.keep_checkpoints, docs/tune.md): only the checkpoints a
// promotion, a retry, a resume or the best trial still needs, and every one with ALL.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "reel/core/tune.h"

namespace reel::core::keep_checkpoints_test {
namespace {

namespace fs = std::filesystem;

constexpr char kBase[] = R"(
  base {
    data { name: "fake" }
    eval_data { name: "fake" }
    model { name: "fake" }
    trainer { steps: 9 learning_rate { base: 0.1 } }
  }
  dimension { field: "trainer.learning_rate.base" values: ["0.1", "0.2", "0.3", "0.4", "0.5",
                                                            "0.6", "0.7", "0.8", "0.9", "1.0",
                                                            "1.1", "1.2"] }
)";

TuneConfigFile Search(const std::string& body) {
  auto f = ParseTuneConfig(std::string(kBase) + body, "search.pbtxt");
  EXPECT_TRUE(f.ok()) << f.status();
  return *f;
}

std::string Scratch(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("keep_checkpoints_" + name);
  fs::remove_all(p);
  return p.string();
}

// Every checkpoint file under the workdir's trials, relative to it.
std::set<std::string> CheckpointFiles(const std::string& workdir) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(fs::path(workdir) / "trials", ec), end; !ec && it != end;
       it.increment(ec))
    if (it->path().extension() == ".reelckpt")
      out.insert(it->path().lexically_relative(workdir).string());
  return out;
}

// A trainer writing a checkpoint every step (as a trial with checkpoint_every_steps: 1 keeps
// several), whose metric grows with the learning rate and the budget. A promoted trial must find
// its previous rung's checkpoint copied in.
struct DiskTrainer {
  std::mutex mu;
  int calls = 0;
  int promoted_without_checkpoint = 0;
  size_t most_files = 0;  // checkpoint files on disk at once, seen as each trial ends
  std::string workdir;
  std::function<bool(int)> interrupt_call;  // true: this call is "interrupted by Ctrl-C"

  TrialRunner Runner() {
    return [this](const TrialRequest& req) -> Result<TrialRun> {
      REEL_ASSIGN_OR_RETURN(ConfigFile cfg, ParseConfig(req.config_text, "trial"));
      const int64_t steps = cfg.config.trainer().steps();
      const bool copied_in = !fs::is_empty(req.dir + "/checkpoints");
      for (int64_t s = 1; s <= steps; ++s)
        std::ofstream(req.dir + "/checkpoints/ckpt-" + std::to_string(1000 + s) + ".reelckpt") << s;
      std::lock_guard<std::mutex> lock(mu);
      const int call = ++calls;
      if (req.resume != copied_in || (req.dir.find("/r0") == std::string::npos && !copied_in))
        ++promoted_without_checkpoint;
      most_files = std::max(most_files, CheckpointFiles(workdir).size());
      TrialRun run;
      run.steps = steps;
      run.eval.gap = cfg.config.trainer().learning_rate().base() * static_cast<double>(steps);
      run.interrupted = interrupt_call && interrupt_call(call);
      return run;
    };
  }
};

TEST(KeepCheckpointsTest, AshaLeavesOnlyTheBestTrialsNewestCheckpoint) {
  TuneConfigFile f = Search(R"(
    search { algorithm: ASHA trials: 12 min_budget: 1 max_budget: 9 eta: 3 }
    execution { parallel: 3 })");
  DiskTrainer trainer;
  TuneOptions o;
  o.workdir = trainer.workdir = Scratch("asha");
  auto r = RunTune(f, o, trainer.Runner());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(trainer.promoted_without_checkpoint, 0) << "a checkpoint went before its promotion";
  ASSERT_TRUE(r->best.has_value());
  const TuneRow& best = r->rows[*r->best];
  EXPECT_EQ(best.budget, 9);
  EXPECT_EQ(CheckpointFiles(o.workdir),
            std::set<std::string>{best.dir + "/checkpoints/ckpt-1009.reelckpt"});
  for (const TuneRow& row : r->rows) {
    EXPECT_EQ(fs::exists(o.workdir + "/" + row.dir + "/checkpoints"), row.dir == best.dir)
        << row.dir;
    EXPECT_TRUE(fs::is_directory(o.workdir + "/" + row.dir)) << "the trial's folder stays";
  }
  // Rung budgets 1, 3, 9 with a file per step: keeping everything would hold at least
  // 12 * 1 + 4 * 3 + 1 * 9 files (plus the copies) by the end.
  EXPECT_LT(trainer.most_files, 12u + 12u + 9u);
}

TEST(KeepCheckpointsTest, AllKeepsEveryCheckpoint) {
  TuneConfigFile f = Search(R"(
    search { algorithm: ASHA trials: 12 min_budget: 1 max_budget: 9 eta: 3 }
    execution { parallel: 3 keep_checkpoints: ALL })");
  DiskTrainer trainer;
  TuneOptions o;
  o.workdir = trainer.workdir = Scratch("all");
  auto r = RunTune(f, o, trainer.Runner());
  ASSERT_TRUE(r.ok()) << r.status();
  size_t expected = 0;
  for (const TuneRow& row : r->rows) {
    EXPECT_TRUE(fs::exists(o.workdir + "/" + row.dir + "/checkpoints/ckpt-" +
                           std::to_string(1000 + row.budget) + ".reelckpt"))
        << row.dir;
    expected += static_cast<size_t>(row.budget);  // its own steps; the copied-in one repeats one
  }
  EXPECT_GE(CheckpointFiles(o.workdir).size(), expected);
}

TEST(KeepCheckpointsTest, GridAndRandomKeepOnlyTheBest) {
  for (const char* search :
       {"search { algorithm: GRID }", "search { algorithm: RANDOM trials: 5 seed: 3 }"}) {
    TuneConfigFile f = Search(std::string(search) + " execution { parallel: 2 }");
    DiskTrainer trainer;
    TuneOptions o;
    o.workdir = trainer.workdir = Scratch("grid");
    auto r = RunTune(f, o, trainer.Runner());
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->best.has_value());
    EXPECT_EQ(CheckpointFiles(o.workdir),
              std::set<std::string>{r->rows[*r->best].dir + "/checkpoints/ckpt-1009.reelckpt"})
        << search;
  }
}

TEST(KeepCheckpointsTest, AnInterruptedSearchResumesWithTheCheckpointsItNeeds) {
  TuneConfigFile f = Search(R"(
    search { algorithm: ASHA trials: 12 min_budget: 1 max_budget: 9 eta: 3 }
    execution { parallel: 1 })");
  const std::string dir = Scratch("resume");
  // Ctrl-C during the 15th trial: past the first promotions, before the search ends.
  std::atomic<bool> stop{false};
  DiskTrainer first;
  first.workdir = dir;
  first.interrupt_call = [&](int call) {
    if (call == 15) stop = true;
    return call == 15;
  };
  TuneOptions o;
  o.workdir = dir;
  o.should_stop = [&] { return stop.load(); };
  auto r1 = RunTune(f, o, first.Runner());
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(r1->interrupted);
  EXPECT_EQ(r1->rows.size(), 14u);

  DiskTrainer second;
  second.workdir = dir;
  TuneOptions again;
  again.workdir = dir;
  again.resume = true;
  auto r2 = RunTune(f, again, second.Runner());
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_FALSE(r2->interrupted);
  EXPECT_EQ(first.promoted_without_checkpoint + second.promoted_without_checkpoint, 0);
  ASSERT_TRUE(r2->best.has_value());
  const TuneRow& best = r2->rows[*r2->best];
  EXPECT_EQ(best.budget, 9);
  EXPECT_EQ(CheckpointFiles(dir),
            std::set<std::string>{best.dir + "/checkpoints/ckpt-1009.reelckpt"});
}

}  // namespace
}  // namespace reel::core::keep_checkpoints_test
