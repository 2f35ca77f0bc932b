// "Does it learn": short training runs must beat the frequency baseline (every class scored by
// its training frequency) on held-out videos. Kept small so each run takes seconds.
#include <gtest/gtest.h>

#include <filesystem>

#include "e2e_util.h"

namespace reel::e2e::learns_test {
namespace {

namespace fs = std::filesystem;

const std::string kRepo = REEL_SOURCE_DIR;
const std::string kYt8m = std::string(REEL_DATA_DIR) + "/yt8m";
constexpr int kClasses = 8;

// Split synthetic data: even classes show their pattern only in rgb, odd ones only in audio.
// One synth run (one set of class patterns) with a held-out split: train/ and test/.
class LearnsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(ScratchDir("learns"));
    RunResult r = Reel({"synth",
                        "--out",
                        *dir_,
                        "--videos",
                        "320",
                        "--test-videos",
                        "80",
                        "--classes",
                        std::to_string(kClasses),
                        "--level",
                        "frame",
                        "--shards",
                        "4",
                        "--min-frames",
                        "4",
                        "--max-frames",
                        "8",
                        "--max-labels",
                        "2",
                        "--seed",
                        "11",
                        "--split"});
    ASSERT_EQ(r.code, 0) << r.err;
    train_files_ = new std::vector<std::string>(ListDir(*dir_ + "/train"));
    test_files_ = new std::vector<std::string>(ListDir(*dir_ + "/test"));
    ASSERT_EQ(train_files_->size(), 4u);
    ASSERT_EQ(test_files_->size(), 4u);
    test_ = new std::string(*dir_ + "/test/*.tfrecord");
    baseline_ = FrequencyBaselineGap(Labels(*train_files_), Labels(*test_files_), kClasses);
    std::cout << "frequency baseline GAP: " << baseline_ << "\n";
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete test_;
    delete train_files_;
    delete test_files_;
  }

  // Trains `config` briefly and returns the held-out GAP reported by `reel eval --json`.
  static double TrainAndEval(const std::string& config,
                             const std::vector<std::string>& model_sets) {
    const std::string run = ScratchDir("learns_" + config);
    std::vector<std::string> args = {"train",
                                     "--config",
                                     kRepo + "/configs/" + config + ".pbtxt",
                                     "--quiet",
                                     "--set",
                                     "data.options.files=" + *dir_ + "/train/*.tfrecord",
                                     "--set",
                                     "eval_data.options.files=" + *test_,
                                     "--set",
                                     "data.options.max_frames=8",
                                     "--set",
                                     "eval_data.options.max_frames=8",
                                     "--set",
                                     "trainer.num_classes=" + std::to_string(kClasses),
                                     "--set",
                                     "trainer.steps=80",
                                     "--set",
                                     "trainer.batch_size=32",
                                     "--set",
                                     "trainer.learning_rate.base=0.01",
                                     "--set",
                                     "trainer.eval_every_steps=0",
                                     "--set",
                                     "trainer.checkpoint_dir=" + run + "/ckpt",
                                     "--set",
                                     "trainer.metrics_log=" + run + "/metrics.jsonl",
                                     "--set",
                                     "trainer.tensorboard_dir=" + run + "/tb"};
    for (const auto& s : model_sets) args.insert(args.end(), {"--set", s});
    RunResult t = Reel(args);
    EXPECT_EQ(t.code, 0) << t.err;
    RunResult e = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", *test_, "--json"});
    EXPECT_EQ(e.code, 0) << e.err;
    fs::remove_all(run);
    double gap = JsonField(e.out, "gap");
    std::cout << config << " held-out GAP: " << gap << "\n";
    ::testing::Test::RecordProperty(config + "_gap", std::to_string(gap));
    return gap;
  }

  static std::string* dir_;
  static std::string* test_;  // a pattern: the held-out shards
  static std::vector<std::string>* train_files_;
  static std::vector<std::string>* test_files_;
  static double baseline_;
};
std::string* LearnsTest::dir_ = nullptr;
std::string* LearnsTest::test_ = nullptr;
std::vector<std::string>* LearnsTest::train_files_ = nullptr;
std::vector<std::string>* LearnsTest::test_files_ = nullptr;
double LearnsTest::baseline_ = 0.0;

// The held-out split is other videos: no id of test/ is in train/ (`reel synth --test-videos`).
TEST_F(LearnsTest, HeldOutVideosAreNotTrainingVideos) {
  const auto train = LabelsById(*train_files_);
  const auto test = LabelsById(*test_files_);
  EXPECT_EQ(train.size(), 320u);
  EXPECT_EQ(test.size(), 80u);
  for (const auto& [id, labels] : test) EXPECT_EQ(train.count(id), 0u) << id << " is in both";
}

TEST_F(LearnsTest, FrameModelsBeatBaselineAndTwoStreamBeatsEachStream) {
  const double video = TrainAndEval("bilstm_video", {"model.options.hidden=16"});
  const double audio = TrainAndEval("bilstm_audio", {"model.options.hidden=16"});
  const double both = TrainAndEval(
      "two_stream", {"model.options.video_hidden=16", "model.options.audio_hidden=16"});
  EXPECT_GT(video, baseline_ + 0.05);
  EXPECT_GT(audio, baseline_ + 0.05);
  EXPECT_GT(both, baseline_ + 0.2);
  // Each single stream sees the signal of half of the classes only.
  EXPECT_GT(both, video + 0.05);
  EXPECT_GT(both, audio + 0.05);
}

// The real YouTube-8M video-level shards: two to train on, the third held out, and the frequency
// baseline's GAP there.
const std::string kRealTest = kYt8m + "/validate0002.tfrecord";
double RealShardsBaseline() {
  return FrequencyBaselineGap(
      Labels({kYt8m + "/validate0000.tfrecord", kYt8m + "/validate0001.tfrecord"}),
      Labels({kRealTest}), 3862);
}

TEST(LearnsRealData, MoeBeatsFrequencyBaseline) {
  const std::string run = ScratchDir("moe_real");
  const std::string test = kRealTest;
  const double baseline = RealShardsBaseline();
  RunResult t = Reel({"train",
                      "--config",
                      kRepo + "/configs/moe.pbtxt",
                      "--quiet",
                      "--set",
                      "data.options.files=" + kYt8m + "/validate000[01].tfrecord",
                      "--set",
                      "eval_data.options.files=" + test,
                      "--set",
                      "trainer.epochs=2",
                      "--set",
                      "trainer.batch_size=64",
                      "--set",
                      "trainer.learning_rate.base=0.01",
                      "--set",
                      "trainer.clip_norm=1",
                      "--set",
                      "model.options.experts=1",
                      "--set",
                      "trainer.checkpoint_dir=" + run + "/ckpt",
                      "--set",
                      "trainer.metrics_log=" + run + "/m.jsonl",
                      "--set",
                      "trainer.tensorboard_dir=" + run + "/tb"});
  ASSERT_EQ(t.code, 0) << t.err;
  RunResult e = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", test, "--json"});
  ASSERT_EQ(e.code, 0) << e.err;
  const double gap = JsonField(e.out, "gap");
  std::cout << "moe on real YT-8M (train 0000+0001, eval 0002): GAP " << gap
            << " vs frequency baseline " << baseline << "\n";
  RecordProperty("moe_gap", std::to_string(gap));
  RecordProperty("baseline_gap", std::to_string(baseline));
  EXPECT_GT(gap, baseline);
  fs::remove_all(run);
}

// Trains configs/<config>.pbtxt as shipped, from the repository root (only its outputs moved to a
// scratch folder), and returns its held-out GAP on the real shards' third file.
double ShippedConfigGap(const std::string& config) {
  const std::string run = ScratchDir("shipped_" + config);
  RunResult t = Reel({"train", "--config", "configs/" + config + ".pbtxt", "--quiet", "--set",
                      "trainer.checkpoint_dir=" + run + "/ckpt", "--set",
                      "trainer.metrics_log=" + run + "/m.jsonl", "--set",
                      "trainer.tensorboard_dir=" + run + "/tb"},
                     kRepo);
  EXPECT_EQ(t.code, 0) << t.err;
  RunResult e = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", kRealTest, "--json"});
  EXPECT_EQ(e.code, 0) << e.err;
  fs::remove_all(run);
  const double gap = JsonField(e.out, "gap");
  std::cout << config << " as shipped, held-out GAP on the real shards: " << gap << "\n";
  ::testing::Test::RecordProperty(config + "_shipped_gap", std::to_string(gap));
  return gap;
}

// configs/moe.pbtxt as shipped: the recipe configs/tune_moe.pbtxt found (issue 13's bar: a
// PyTorch MoE with Adam, batch 64, no clipping reaches GAP@20 0.159-0.161 on validate0002).
TEST(LearnsRealData, ShippedMoeRecipeReachesTheTunedGap) {
  EXPECT_GE(ShippedConfigGap("moe"), 0.16);
}

// configs/logistic_async.pbtxt as shipped (a parameter server and two Downpour workers, as
// threads): asynchronous training of the real shards must learn, well above the frequency
// baseline. Its adagrad once ran under the trainer's global gradient clip (norm 1, meant for Adam):
// this 3862-class model's gradient has a norm far above 1, so the clip shrank every push until
// adagrad barely moved (GAP 0.0001 after 10 epochs, the baseline's order).
TEST(LearnsRealData, ShippedAsyncRecipeLearns) {
  const double baseline = RealShardsBaseline();
  std::cout << "frequency baseline GAP: " << baseline << "\n";
  EXPECT_GT(ShippedConfigGap("logistic_async"), baseline + 0.1);
}

}  // namespace
}  // namespace reel::e2e::learns_test
