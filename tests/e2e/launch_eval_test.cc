// `reel eval` and `reel predict` started by `reel launch`: the ranks split the data, rank 0 prints
// the merged metrics or writes every rank's rows, and ranks given different commands are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e {
namespace {

// A checkpoint of a 4-step run (trained by one process) and its data, 120 videos in 3 files.
class LaunchEvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    run_ = TrainRun::Make("launch_eval", "", &why);
    if (!run_) GTEST_SKIP() << why;
    RunResult r = Reel({"train", "--config", run_->config(), "--set", "trainer.steps=4"});
    ASSERT_EQ(r.code, 0) << r.err;
    data_ = run_->dir() + "/data/*.tfrecord";
    ckpt_ = run_->dir() + "/ckpt";
  }
  // The lines of `text` that start with `prefix`, without it.
  static std::vector<std::string> LinesOf(const std::string& text, const std::string& prefix) {
    std::vector<std::string> out;
    for (const std::string& line : Lines(text))
      if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
    return out;
  }
  // The videos each rank says it did ("reel COMMAND: rank R of N DID K videos"), which must be
  // a share of all 120: together all of them, and none of them alone.
  static void ExpectShares(const std::string& err, const std::string& command,
                           const std::string& did, int ranks) {
    int64_t sum = 0;
    for (int r = 0; r < ranks; ++r) {
      const std::string say = "[rank " + std::to_string(r) + "] reel " + command + ": rank " +
                              std::to_string(r) + " of " + std::to_string(ranks) + " " + did + " ";
      const size_t at = err.find(say);
      ASSERT_NE(at, std::string::npos) << err;
      const int64_t videos = std::stoll(err.substr(at + say.size()));
      EXPECT_GT(videos, 0) << err;
      EXPECT_LT(videos, 120) << err;
      sum += videos;
    }
    EXPECT_EQ(sum, 120) << err;
  }
  std::unique_ptr<TrainRun> run_;
  std::string data_, ckpt_;
};

TEST_F(LaunchEvalTest, RanksSplitTheDataAndRankZeroPrintsTheMetricsOfAll) {
  RunResult alone = Reel({"eval", "--checkpoint", ckpt_, "--data", data_, "--json"});
  ASSERT_EQ(alone.code, 0) << alone.err;
  RunResult three = Reel({"launch", "-n", "3", "--", "reel", "eval", "--checkpoint", ckpt_,
                          "--data", data_, "--json"});
  ASSERT_EQ(three.code, 0) << three.err;
  ExpectShares(three.err, "eval", "scored", 3);
  // One JSON line, from rank 0, of every video once.
  EXPECT_TRUE(LinesOf(three.out, "[rank 1] ").empty()) << three.out;
  EXPECT_TRUE(LinesOf(three.out, "[rank 2] ").empty()) << three.out;
  std::vector<std::string> json = LinesOf(three.out, "[rank 0] ");
  ASSERT_EQ(json.size(), 1u) << three.out;
  EXPECT_EQ(JsonField(json[0], "videos"), 120) << json[0];
  for (const char* field : {"videos", "gap", "hit_at_1", "perr", "map"})
    EXPECT_NEAR(JsonField(json[0], field), JsonField(alone.out, field), 1e-6) << field;
  // As `reel train` does, every rank says that the launcher chose the transport and that the
  // ranks divide the cores (unless the user chose the threads).
  for (const char* rank : {"[rank 0] ", "[rank 1] ", "[rank 2] "}) {
    EXPECT_NE(three.err.find(std::string(rank) + "reel: REEL_TRANSPORT=tcp"), std::string::npos)
        << three.err;
    EXPECT_EQ(three.err.find(std::string(rank) + "reel: 3 ranks share this process's") !=
                  std::string::npos,
              std::getenv("OMP_NUM_THREADS") == nullptr)
        << three.err;
  }
}

TEST_F(LaunchEvalTest, RankZeroWritesEveryRanksPredictionsOnce) {
  const std::string one = run_->dir() + "/one.csv", two = run_->dir() + "/two.csv";
  RunResult alone = Reel({"predict", "--checkpoint", ckpt_, "--data", data_, "--out", one});
  ASSERT_EQ(alone.code, 0) << alone.err;
  RunResult launched = Reel({"launch", "-n", "2", "--", "reel", "predict", "--checkpoint", ckpt_,
                             "--data", data_, "--out", two});
  ASSERT_EQ(launched.code, 0) << launched.err;
  ExpectShares(launched.err, "predict", "predicted", 2);
  std::vector<std::string> expected = Lines(ReadFile(one)), got = Lines(ReadFile(two));
  ASSERT_EQ(expected.size(), 121u);  // the header and 120 videos
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0], "VideoId,LabelConfidencePairs");
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);  // every video once, scored as by one process
}

// Ranks that would merge the results of different commands are refused, every one of them,
// before anything is scored or written.
TEST_F(LaunchEvalTest, RanksGivenDifferentCommandsAreRefused) {
  const std::string out = run_->dir() + "/p.csv";
  const std::string predict = std::string("'") + REEL_EXE + "' predict --checkpoint '" + ckpt_ +
                              "' --data '" + data_ + "' --out '" + out +
                              "' --top-k $((3 + REEL_RANK))";
  RunResult r = LaunchSh({"-n", "2"}, "exec " + predict);
  EXPECT_NE(r.code, 0);
  ExpectEveryRankSaid(r.err, 2,
                      "reel predict: INVALID_ARGUMENT: every rank must use the same --top-k "
                      "(rank 0: 3, rank 1: 4)");
  EXPECT_EQ(r.err.find("usage:"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace reel::e2e
