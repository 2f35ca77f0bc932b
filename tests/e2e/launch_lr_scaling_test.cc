// trainer.learning_rate.scaling "linear" (docs/distributed.md, "The learning rate at another
// size"): a run resumed at another number of training ranks trains at the schedule's rate times
// N / reference, the reference being the ranks the run started with (recorded in its checkpoints)
// or reference_ranks, says so at every start, and logs that rate; bad values are refused.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e {
namespace {

// (step, lr) of every line of the metrics log that has both.
std::vector<std::pair<long, double>> LoggedRates(const std::string& metrics) {
  std::vector<std::pair<long, double>> out;
  static const std::regex kStep("\"step\": ?([0-9]+)"), kLr("\"lr\": ?([-+0-9.eE]+)");
  for (const std::string& line : Lines(ReadFile(metrics))) {
    std::smatch step, lr;
    if (std::regex_search(line, step, kStep) && std::regex_search(line, lr, kLr))
      out.emplace_back(std::stol(step[1]), std::stod(lr[1]));
  }
  return out;
}

// `reel train` of `run` as `ranks` ranks (threads of this process) with linear scaling, to
// `steps`; more --set lines may follow.
std::vector<std::string> ScaledTrain(const TrainRun& run, int ranks, int steps,
                                     std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"train",
                                   "--config",
                                   run.config(),
                                   "--set",
                                   "trainer.learning_rate.scaling=linear",
                                   "--set",
                                   "trainer.local_ranks=" + std::to_string(ranks),
                                   "--set",
                                   "trainer.steps=" + std::to_string(steps)};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Started on 2 ranks (x1), resumed on 1 (x0.5 of the base rate 0.001), then on 4 (x2); with
// reference_ranks 4, on 4 ranks x1. The metrics log's rate of each step is the schedule's
// (constant) times that.
TEST(LaunchLrScalingTest, TheRateFollowsTheNumberOfRanksAgainstTheRunsFirst) {
  std::string why;
  auto run = TrainRun::Make("launch_lr_scaling", "", &why);
  if (!run) GTEST_SKIP() << why;
  const std::string metrics = run->dir() + "/metrics.jsonl";
  struct Session {
    int ranks, steps;
    std::vector<std::string> more;
    std::string said;
    double factor;
  };
  const std::vector<Session> sessions = {
      {2,
       2,
       {},
       "learning rate x1.0000 (trainer.learning_rate.scaling: linear): 2 training "
       "ranks against 2 (the ranks the run started with)",
       1.0},
      {1,
       4,
       {"--resume"},
       "learning rate x0.5000 (trainer.learning_rate.scaling: linear): 1 "
       "training ranks against 2 (the ranks the run started with)",
       0.5},
      {4,
       6,
       {"--resume"},
       "learning rate x2.0000 (trainer.learning_rate.scaling: linear): 4 "
       "training ranks against 2 (the ranks the run started with)",
       2.0},
      {4,
       8,
       {"--resume", "--set", "trainer.learning_rate.reference_ranks=4"},
       "learning rate x1.0000 (trainer.learning_rate.scaling: linear): 4 training ranks against "
       "4 (reference_ranks)",
       1.0}};
  long from = 0;
  for (const Session& s : sessions) {
    RunResult r = Reel(ScaledTrain(*run, s.ranks, s.steps, s.more));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find(s.said), std::string::npos) << r.err;
    std::set<long> seen;  // (ranks that step together log their last step once more at the end)
    for (const auto& [step, lr] : LoggedRates(metrics))
      if (step > from && step <= s.steps) {
        EXPECT_NEAR(lr, 0.001 * s.factor, 1e-9) << "step " << step;
        seen.insert(step);
      }
    EXPECT_EQ(static_cast<long>(seen.size()), s.steps - from) << ReadFile(metrics);
    from = s.steps;
  }
}

TEST(LaunchLrScalingTest, BadScalingSettingsAreRefusedBeforeTraining) {
  std::string why;
  auto run = TrainRun::Make("launch_lr_scaling_bad", "", &why);
  if (!run) GTEST_SKIP() << why;
  RunResult r = Reel(ScaledTrain(*run, 1, 2, {"--set", "trainer.learning_rate.scaling=quadratic"}));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("trainer: learning_rate.scaling must be \"none\" or \"linear\", got "
                       "\"quadratic\""),
            std::string::npos)
      << r.err;
  r = Reel(ScaledTrain(*run, 1, 2, {"--set", "trainer.learning_rate.reference_ranks=-1"}));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("trainer: learning_rate.reference_ranks must be >= 0 (0: the ranks the run "
                       "started with), got -1"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(run->Checkpoints().empty()) << "trained with a bad setting";
}

}  // namespace
}  // namespace reel::e2e
