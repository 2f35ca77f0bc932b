// `reel tune` learns: the shipped searches (the BiLSTM's ASHA on the demo's synthetic frames, the
// MoE search on the real shards) find a model well above the frequency baseline. Label `learns`:
// the release build runs them (CMakePresets.json), uninstrumented, as users run a search.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "e2e_util.h"

namespace reel::e2e::tune_learns_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The shipped example on the demo's synthetic frame-level data: ASHA over the BiLSTM.
TEST(TuneLearns, BilstmAshaExampleFindsAModelBetterThanTheFrequencyBaseline) {
  const std::string dir = ScratchDir("tune_bilstm");
  // The demo's data (its MakeData): one synth run split by shard, the last shard held out.
  RunResult synth = Reel({"synth",
                          "--out",
                          dir + "/reel-demo/data/train",
                          "--videos",
                          "1000",
                          "--classes",
                          "16",
                          "--level",
                          "frame",
                          "--shards",
                          "5",
                          "--seed",
                          "7",
                          "--min-frames",
                          "8",
                          "--max-frames",
                          "24",
                          "--max-labels",
                          "3",
                          "--amplitude",
                          "0.1",
                          "--noise",
                          "1.0"});
  ASSERT_EQ(synth.code, 0) << synth.err;
  std::vector<std::string> shards = ListDir(dir + "/reel-demo/data/train");
  ASSERT_EQ(shards.size(), 5u);
  fs::create_directories(dir + "/reel-demo/data/test");
  const std::string test =
      dir + "/reel-demo/data/test/" + fs::path(shards.back()).filename().string();
  fs::rename(shards.back(), test);
  shards.pop_back();

  RunResult r = Reel({"tune", "--config", REEL_SOURCE_DIR "/configs/tune_bilstm_asha.pbtxt",
                      "--workdir", "runs/tune"},
                     dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string csv = ReadFile(dir + "/runs/tune/results.csv");
  EXPECT_GE(Count(csv, ",ok,"), 9 + 3 + 1) << csv;  // 9 on the first rung, promotions after
  const double baseline = FrequencyBaselineGap(Labels(shards), Labels({test}), 16);
  // The best row (first line after the header): metric column after "ok,".
  std::istringstream lines(csv);
  std::string header, best;
  std::getline(lines, header);
  std::getline(lines, best);
  const size_t at = best.find(",ok,");
  ASSERT_NE(at, std::string::npos) << best;
  const double gap = std::stod(best.substr(at + 4));
  EXPECT_GT(gap, baseline + 0.05) << best;
  EXPECT_THAT(best, HasSubstr(",180,")) << "the best trial is a full-budget one";
  // best.pbtxt is a training config with the best trial's values.
  const std::string best_config = ReadFile(dir + "/runs/tune/best.pbtxt");
  EXPECT_THAT(best_config, HasSubstr("steps: 180"));
  EXPECT_THAT(best_config, HasSubstr("name: \"bilstm_video\""));
}

// The shipped MoE search on the real shards, on a smaller budget so that it stays a CI test: 4 of
// its 24 configurations, rungs of 1 and 3 epochs. The promoted trial resumes from its first rung's
// checkpoint and must have trained exactly 3 epochs in all (ASHA may promote one or two of 4).
std::vector<std::string> SplitCsvLine(const std::string& line) {  // no quoted fields in results.csv
  std::vector<std::string> cells(1);
  for (char c : line) {
    if (c == ',') {
      cells.emplace_back();
    } else {
      cells.back().push_back(c);
    }
  }
  return cells;
}

TEST(TuneLearns, MoeSearchOnTheRealShardsPromotesWithWholeEpochs) {
  const std::string dir = ScratchDir("tune_moe");
  std::string search = ReadFile(REEL_SOURCE_DIR "/configs/tune_moe.pbtxt");
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"\"data/yt8m/", "\"" REEL_DATA_DIR "/yt8m/"},
        {"trials: 24", "trials: 4"},
        {"max_budget: 5", "max_budget: 3"}}) {
    size_t at;
    ASSERT_NE(search.find(from), std::string::npos) << from << " is no longer in tune_moe.pbtxt";
    while ((at = search.find(from)) != std::string::npos) search.replace(at, from.size(), to);
  }
  WriteFile(dir + "/tune_moe.pbtxt", search);
  RunResult r = Reel({"tune", "--config", dir + "/tune_moe.pbtxt", "--workdir", dir + "/runs"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream csv(ReadFile(dir + "/runs/results.csv"));
  std::string line;
  std::getline(csv, line);
  std::vector<std::string> header = SplitCsvLine(line);
  auto column = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  const auto config = column("config"), rung = column("rung"), steps = column("steps"),
             status = column("status"), gap = column("GAP@20");
  ASSERT_LT(gap, static_cast<long>(header.size())) << line;
  std::map<std::string, int64_t> first_rung_steps;  // config -> steps of its 1-epoch trial
  std::vector<std::pair<std::string, int64_t>> promoted;
  double best = 0;
  while (std::getline(csv, line)) {
    const std::vector<std::string> row = SplitCsvLine(line);
    ASSERT_EQ(row.size(), header.size()) << line;
    EXPECT_EQ(row[status], "ok") << line;
    if (row[rung] == "0") first_rung_steps[row[config]] = std::stoll(row[steps]);
    if (row[rung] == "1") promoted.emplace_back(row[config], std::stoll(row[steps]));
    best = std::max(best, std::stod(row[gap]));
  }
  ASSERT_EQ(first_rung_steps.size(), 4u);
  ASSERT_FALSE(promoted.empty()) << "nothing was promoted";
  for (const auto& [c, s] : promoted) {  // batch sizes differ, so do steps per epoch
    EXPECT_GT(first_rung_steps[c], 0);
    EXPECT_EQ(s, 3 * first_rung_steps[c]) << "config " << c << ": a promotion lost epochs";
  }
  const double baseline =
      FrequencyBaselineGap(Labels({REEL_DATA_DIR "/yt8m/validate0000.tfrecord",
                                   REEL_DATA_DIR "/yt8m/validate0001.tfrecord"}),
                           Labels({REEL_DATA_DIR "/yt8m/validate0002.tfrecord"}), 3862);
  EXPECT_GT(best, baseline + 0.05);
  EXPECT_THAT(ReadFile(dir + "/runs/best.pbtxt"), HasSubstr("name: \"moe\""));
}

}  // namespace
}  // namespace reel::e2e::tune_learns_test
