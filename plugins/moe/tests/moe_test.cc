// Tests of the video-level models: gradients against finite differences, the logistic model against
// a direct formula, a few SGD steps, bad inputs and options.
#include <gtest/gtest.h>

#include <map>

#include "reel/layers/testing.h"
#include "video_level_model.h"

namespace reel::moe {
namespace {

using layers::testing::CheckGradientReports;
using layers::testing::CheckModelGradients;
using layers::testing::RandomVector;
using layers::testing::SgdLowersLoss;
using layers::testing::SigmoidCrossEntropy;

constexpr int64_t kClasses = 4;

struct Built {
  std::unique_ptr<ParamArena> arena;
  std::unique_ptr<VideoLevelModel> model;
};

Result<std::unique_ptr<VideoLevelModel>> Make(const std::string& kind,
                                              std::map<std::string, std::string> given) {
  given.insert({"widths", "6,3"});
  REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(VideoLevelOptions(kind == "moe"), given, kind));
  ModelContext context;
  context.num_classes = kClasses;
  return VideoLevelModel::Create(kind, o, context);
}

Built Build(const std::string& kind, uint64_t seed = 1) {
  Built out;
  auto m = Make(kind, {});
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return out;
  out.model = std::move(*m);
  out.arena = std::make_unique<ParamArena>();
  EXPECT_TRUE(out.model->DeclareParams(*out.arena).ok());
  out.arena->Finalize();
  EXPECT_TRUE(out.model->Initialize(seed).ok());
  return out;
}

// Video-level batch: mean_rgb [B, 1, 6], mean_audio [B, 1, 3]; labels depend on the features'
// signs so that they are learnable.
Batch VideoBatch(int64_t b_n, uint64_t seed) {
  Batch batch;
  std::vector<float> rgb = RandomVector(b_n * 6, seed), audio = RandomVector(b_n * 3, seed + 1);
  for (int64_t b = 0; b < b_n; ++b) {
    batch.ids.push_back("v" + std::to_string(b));
    if (rgb[b * 6] > 0) batch.label_ids.push_back(0);
    if (audio[b * 3] + rgb[b * 6 + 1] > 0) batch.label_ids.push_back(2);
    batch.label_ids.push_back(3);
    batch.label_offsets.push_back(static_cast<int64_t>(batch.label_ids.size()));
  }
  batch.features["mean_rgb"] = Feature{Tensor({b_n, 1, 6}, rgb), std::vector<int32_t>(b_n, 1)};
  batch.features["mean_audio"] = Feature{Tensor({b_n, 1, 3}, audio), std::vector<int32_t>(b_n, 1)};
  return batch;
}

class VideoLevelGradientTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VideoLevelGradientTest, EveryBlockMatchesFiniteDifferences) {
  Built built = Build(GetParam(), 3);
  ASSERT_TRUE(built.model);
  for (float& v : built.arena->values()) v += 0.05f;  // non-zero biases too
  Batch batch = VideoBatch(5, 7);
  EXPECT_TRUE(CheckModelGradients(*built.model, *built.arena, batch, 1e-2f, 1e-2, 1e-4, 30));
}

// The experts before the gates (docs/distributed.md), each final when reported.
TEST_P(VideoLevelGradientTest, ReportsEveryBlockFinalInDescendingOrder) {
  Built built = Build(GetParam(), 3);
  ASSERT_TRUE(built.model);
  EXPECT_TRUE(CheckGradientReports(*built.model, *built.arena, VideoBatch(5, 7)));
}

INSTANTIATE_TEST_SUITE_P(Models, VideoLevelGradientTest, ::testing::Values("logistic", "moe"));

TEST(VideoLevelModelTest, LogisticIsOneDenseLayerOnTheConcatenatedFeatures) {
  Built built = Build("logistic", 2);
  Batch batch = VideoBatch(3, 9);
  // Make mean_audio a two-frame feature for video 1 to check the averaging over valid frames.
  Feature& audio = batch.features["mean_audio"];
  std::vector<float> two(3 * 2 * 3, 0.0f);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t j = 0; j < 3; ++j) two[(b * 2) * 3 + j] = audio.values.data()[b * 3 + j];
  two[(1 * 2 + 1) * 3 + 0] = 5.0f;
  audio = Feature{Tensor({3, 2, 3}, two), {1, 2, 1}};
  auto logits = built.model->Forward(batch, Mode::kInfer);
  ASSERT_TRUE(logits.ok());
  auto w = built.arena->values(0), bias = built.arena->values(1);
  for (int64_t b = 0; b < 3; ++b) {
    std::vector<double> x;
    for (int64_t j = 0; j < 6; ++j)
      x.push_back(batch.features["mean_rgb"].values.data()[b * 6 + j]);
    for (int64_t j = 0; j < 3; ++j) {
      double v = two[(b * 2) * 3 + j];
      if (b == 1) v = (v + two[(b * 2 + 1) * 3 + j]) / 2;
      x.push_back(v);
    }
    for (int64_t c = 0; c < kClasses; ++c) {
      double want = bias[c];
      for (int64_t i = 0; i < 9; ++i) want += x[i] * w[i * kClasses + c];
      EXPECT_NEAR(logits->data()[b * kClasses + c], want, 1e-5);
    }
  }
}

TEST(VideoLevelModelTest, SgdStepsLowerTheLoss) {
  for (std::string kind : {"logistic", "moe"}) {
    Built built = Build(kind, 4);
    Batch batch = VideoBatch(16, 11);
    EXPECT_TRUE(SgdLowersLoss(*built.model, *built.arena, batch, 60, 1.0f, 0.6)) << kind;
  }
}

TEST(VideoLevelModelTest, DeterministicUnderSeed) {
  Built a = Build("moe", 8), b = Build("moe", 8), c = Build("moe", 9);
  auto values = [](const ParamArena& p) {
    return std::vector<float>(p.values().begin(), p.values().end());
  };
  EXPECT_EQ(values(*a.arena), values(*b.arena));
  EXPECT_NE(values(*a.arena), values(*c.arena));
}

void ExpectInvalidNaming(const Result<Tensor>& r, const std::string& text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status();
}

TEST(VideoLevelModelTest, BadInputsAreInvalidArgumentsNamingTheFeature) {
  Built built = Build("moe");
  const Batch good = VideoBatch(2, 1);
  Batch missing = good;
  missing.features.erase("mean_audio");
  ExpectInvalidNaming(built.model->Forward(missing, Mode::kTrain), "'mean_audio'");
  Batch wide = good;
  wide.features["mean_rgb"].values.Reshape({2, 2, 3});
  ExpectInvalidNaming(built.model->Forward(wide, Mode::kTrain), "'mean_rgb' has width 3, want 6");
  Batch zero = good;
  zero.features["mean_audio"].lengths[1] = 0;
  ExpectInvalidNaming(built.model->Forward(zero, Mode::kTrain),
                      "'mean_audio' of video 'v1' has length 0");
  Batch too_long = good;
  too_long.features["mean_rgb"].lengths[0] = 2;
  ExpectInvalidNaming(built.model->Forward(too_long, Mode::kInfer),
                      "'mean_rgb' of video 'v0' has length 2, want 1..1");
  Batch mismatched = good;
  mismatched.features["mean_audio"] = VideoBatch(3, 1).features["mean_audio"];
  ExpectInvalidNaming(built.model->Forward(mismatched, Mode::kTrain), "'mean_audio' has 3 videos");
  EXPECT_TRUE(built.model->Forward(good, Mode::kTrain).ok());
  EXPECT_EQ(built.model->Backward(good, Tensor({3, kClasses})).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(built.model->Forward(good, Mode::kInfer).ok());
  EXPECT_EQ(built.model->Backward(good, Tensor({2, kClasses})).code(),
            StatusCode::kFailedPrecondition);
}

TEST(VideoLevelModelTest, BadOptionsAreInvalidArgumentsNamingTheOption) {
  for (const auto& [kind, given, option] :
       std::vector<std::tuple<std::string, std::map<std::string, std::string>, std::string>>{
           {"moe", {{"experts", "0"}}, "'experts'"},
           {"logistic", {{"features", "mean_rgb"}}, "'widths'"},
           {"logistic", {{"widths", "6,x"}}, "'widths'"},
           {"logistic", {{"widths", "6,0"}}, "'widths'"},
           {"logistic", {{"features", ""}, {"widths", ""}}, "'features'"}}) {
    auto m = Make(kind, given);
    ASSERT_FALSE(m.ok()) << option;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(option), std::string::npos) << m.status();
  }
  auto defaults = ParseOptions(VideoLevelOptions(true), {});
  ModelContext context;
  auto real = VideoLevelModel::Create("moe", *defaults, context);
  ASSERT_TRUE(real.ok());
  EXPECT_EQ((*real)->InputFeatures(), (std::vector<std::string>{"mean_rgb", "mean_audio"}));
}

}  // namespace
}  // namespace reel::moe
