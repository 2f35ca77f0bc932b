// The models in bf16 (ModelContext::precision): the same weights and batch in fp32 and bf16 give
// logits and gradients equal within bf16's rounding, for every shape class the packed layout has
// (short, long, uneven lengths, one video), and training in bf16 still lowers the loss. Skipped,
// saying why, on CPUs without AVX-512 BF16.
#include "reel/layers/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "reel/layers/testing.h"
#include "test_batches.h"

namespace reel::bilstm {
namespace {

using layers::testing::SgdLowersLoss;
using layers::testing::SigmoidCrossEntropy;
using testing::AddFeature;
using testing::AddIdsAndLabels;
using testing::Build;

constexpr int64_t kBf16Classes = 7;

#define REEL_SKIP_WITHOUT_BF16()                                                              \
  do {                                                                                        \
    if (!layers::CpuHasBf16()) {                                                              \
      GTEST_SKIP() << "this CPU has no AVX-512 BF16, so bf16 runs are refused here (see the " \
                      "trainer.precision docs)";                                              \
    }                                                                                         \
  } while (false)

struct ShapeCase {
  std::string name;
  std::vector<int32_t> lengths;
};

std::map<std::string, std::string> Bf16Options() {
  return {{"video_width", "24"}, {"audio_width", "16"}, {"video_hidden", "16"},
          {"audio_hidden", "8"}, {"layers", "2"},       {"head", "moe"}};
}

Batch MakeBatch(const std::vector<int32_t>& lengths) {
  std::vector<uint64_t> seeds(lengths.size());
  std::iota(seeds.begin(), seeds.end(), 100);
  const int32_t steps = *std::max_element(lengths.begin(), lengths.end()) + 2;  // padding too
  Batch batch;
  AddIdsAndLabels(batch, seeds, kBf16Classes);
  AddFeature(batch, "rgb", 24, steps, lengths, seeds);
  AddFeature(batch, "audio", 16, steps, lengths, seeds);
  return batch;
}

// ||a - b|| / ||b||.
double RelativeDistance(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class Bf16ModelTest : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(Bf16ModelTest, LogitsAndGradientsMatchFp32WithinBf16Rounding) {
  REEL_SKIP_WITHOUT_BF16();
  auto fp32 = Build("two_stream", Bf16Options(), kBf16Classes, 3, 0, Precision::kFp32);
  auto bf16 = Build("two_stream", Bf16Options(), kBf16Classes, 3, 0, Precision::kBf16);
  ASSERT_TRUE(fp32.model && bf16.model);
  const Batch batch = MakeBatch(GetParam().lengths);
  const int64_t b = static_cast<int64_t>(GetParam().lengths.size());
  auto l32 = fp32.model->Forward(batch, Mode::kTrain);
  auto l16 = bf16.model->Forward(batch, Mode::kTrain);
  ASSERT_TRUE(l32.ok() && l16.ok());
  // bf16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%); products of a few dozen terms
  // and two layers of recurrence compound it to about a percent.
  const double logits = RelativeDistance(l16->data(), l32->data(), l32->size());
  EXPECT_LT(logits, 0.02);
  EXPECT_GT(logits, 0.0) << "the bf16 model computed exactly as fp32: no bf16 product ran";
  const std::vector<float> d = SigmoidCrossEntropy(*l32, batch).dlogits;
  ASSERT_TRUE(fp32.model->Backward(batch, Tensor({b, kBf16Classes}, d)).ok());
  ASSERT_TRUE(bf16.model->Backward(batch, Tensor({b, kBf16Classes}, d)).ok());
  for (const auto& block : fp32.arena->blocks()) {
    const double dist = RelativeDistance(bf16.arena->grads().data() + block.offset,
                                         fp32.arena->grads().data() + block.offset, block.size);
    EXPECT_LT(dist, 0.05) << block.name;
  }
  // Inference takes the bf16 path too: the training logits again.
  auto infer = bf16.model->Forward(batch, Mode::kInfer);
  ASSERT_TRUE(infer.ok());
  for (int64_t i = 0; i < l16->size(); ++i) EXPECT_EQ(infer->data()[i], l16->data()[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16ModelTest,
                         ::testing::Values(ShapeCase{"short", {1, 2, 3, 2}},
                                           ShapeCase{"long", {60, 41, 64}},
                                           ShapeCase{"uneven", {3, 17, 1, 9, 17, 2}},
                                           ShapeCase{"one_video", {11}}),
                         [](const auto& info) { return info.param.name; });

TEST(Bf16ModelTest, SgdStepsLowerTheLoss) {
  REEL_SKIP_WITHOUT_BF16();
  auto built = Build("two_stream", Bf16Options(), kBf16Classes, 5, 0, Precision::kBf16);
  ASSERT_TRUE(built.model);
  EXPECT_TRUE(SgdLowersLoss(*built.model, *built.arena, MakeBatch({5, 3, 4, 2}), 40, 4.0f, 0.5));
}

}  // namespace
}  // namespace reel::bilstm
