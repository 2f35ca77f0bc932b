// Tests of the bilstm models: whole-model finite-difference gradients, padding invariance,
// determinism, the primitive cache, bad inputs and a few SGD steps.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <thread>

#include "reel/layers/testing.h"
#include "test_batches.h"

namespace reel::bilstm {
namespace {

using layers::testing::CheckGradientReports;
using layers::testing::CheckModelGradients;
using layers::testing::SgdLowersLoss;
using layers::testing::SigmoidCrossEntropy;
using testing::AddFeature;
using testing::AddIdsAndLabels;
using testing::Build;

constexpr int64_t kClasses = 5;

// A tiny batch for `kind` with videos of different lengths (and padding past every length).
Batch TinyBatch(const std::string& kind, const std::vector<int32_t>& lengths, int64_t steps,
                const std::vector<uint64_t>& seeds) {
  Batch batch;
  AddIdsAndLabels(batch, seeds, kClasses);
  if (kind != "bilstm_audio") AddFeature(batch, "rgb", 6, steps, lengths, seeds);
  if (kind != "bilstm_video") AddFeature(batch, "audio", 4, steps, lengths, seeds);
  return batch;
}

std::map<std::string, std::string> TinyOptions(const std::string& kind, const std::string& head,
                                               const std::string& pooling, int layers,
                                               const std::string& impl = "gemm") {
  std::map<std::string, std::string> o = {
      {"head", head}, {"pooling", pooling}, {"layers", std::to_string(layers)}, {"impl", impl}};
  if (kind == "two_stream") {
    o.insert(
        {{"video_width", "6"}, {"audio_width", "4"}, {"video_hidden", "3"}, {"audio_hidden", "2"}});
  } else {
    o.insert({{"width", kind == "bilstm_video" ? "6" : "4"}, {"hidden", "3"}});
  }
  return o;
}

struct GradCase {
  std::string kind, head, pooling;
  int layers;
  std::string impl;
};

void PrintTo(const GradCase& c, std::ostream* os) {
  *os << c.kind << "/" << c.head << "/" << c.pooling << "/" << c.layers << "/" << c.impl;
}

class ModelGradientTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(ModelGradientTest, EveryBlockMatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  auto built = Build(c.kind, TinyOptions(c.kind, c.head, c.pooling, c.layers, c.impl), kClasses, 3);
  ASSERT_TRUE(built.model);
  Batch batch = TinyBatch(c.kind, {4, 2, 3}, 5, {11, 12, 13});
  EXPECT_TRUE(CheckModelGradients(*built.model, *built.arena, batch, 1e-2f, 2e-2, 3e-4, 8));
}

// The head, then each layer top down, the last stream first (docs/distributed.md), each final
// when reported, and the same gradient without a sink.
TEST_P(ModelGradientTest, ReportsEveryBlockFinalInDescendingOrder) {
  const GradCase& c = GetParam();
  auto built = Build(c.kind, TinyOptions(c.kind, c.head, c.pooling, c.layers, c.impl), kClasses, 3);
  ASSERT_TRUE(built.model);
  Batch batch = TinyBatch(c.kind, {4, 2, 3}, 5, {11, 12, 13});
  EXPECT_TRUE(CheckGradientReports(*built.model, *built.arena, batch));
}

std::vector<GradCase> GradCases() {
  std::vector<GradCase> cases;
  for (std::string impl : {"gemm", "dnnl_rnn"})
    for (GradCase c : {GradCase{"bilstm_video", "moe", "last", 2, ""},
                       GradCase{"bilstm_audio", "logistic", "mean", 1, ""},
                       GradCase{"two_stream", "moe", "max", 1, ""},
                       GradCase{"two_stream", "logistic", "last", 2, ""}}) {
      c.impl = impl;
      cases.push_back(c);
    }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradientTest, ::testing::ValuesIn(GradCases()),
                         [](const auto& info) {
                           return info.param.kind + "_" + info.param.head + "_" +
                                  info.param.pooling + "_" + std::to_string(info.param.layers) +
                                  "_" + info.param.impl;
                         });

// Both implementations from the same weights on the same batch (different lengths, padding past
// every length, 2 layers): logits and every parameter gradient equal to float tolerance.
class ImplAgreementTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ImplAgreementTest, GemmAndDnnlRnnGiveTheSameLogitsAndGradients) {
  auto gemm =
      Build("two_stream", TinyOptions("two_stream", "moe", GetParam(), 2, "gemm"), kClasses, 6);
  auto rnn =
      Build("two_stream", TinyOptions("two_stream", "moe", GetParam(), 2, "dnnl_rnn"), kClasses, 6);
  ASSERT_TRUE(gemm.model && rnn.model);
  Batch batch = TinyBatch("two_stream", {3, 7, 1, 5, 7}, 8, {41, 42, 43, 44, 45});
  auto lg = gemm.model->Forward(batch, Mode::kTrain), lr = rnn.model->Forward(batch, Mode::kTrain);
  ASSERT_TRUE(lg.ok() && lr.ok());
  for (int64_t i = 0; i < lg->size(); ++i)
    EXPECT_NEAR(lg->data()[i], lr->data()[i], 1e-5 + 1e-5 * std::abs(lr->data()[i])) << i;
  const std::vector<float> d = SigmoidCrossEntropy(*lr, batch).dlogits;
  ASSERT_TRUE(gemm.model->Backward(batch, Tensor({5, kClasses}, d)).ok());
  ASSERT_TRUE(rnn.model->Backward(batch, Tensor({5, kClasses}, d)).ok());
  ASSERT_EQ(gemm.arena->total_size(), rnn.arena->total_size());
  for (const auto& block : rnn.arena->blocks())
    for (int64_t i = 0; i < block.size; ++i) {
      const float a = gemm.arena->grads()[block.offset + i],
                  b = rnn.arena->grads()[block.offset + i];
      ASSERT_NEAR(a, b, 1e-6 + 1e-4 * std::abs(b)) << block.name << "[" << i << "]";
    }
  // Inference takes the same path: the same logits as training mode.
  auto infer = gemm.model->Forward(batch, Mode::kInfer);
  ASSERT_TRUE(infer.ok());
  for (int64_t i = 0; i < lg->size(); ++i) EXPECT_EQ(infer->data()[i], lg->data()[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Poolings, ImplAgreementTest, ::testing::Values("last", "mean", "max"));

struct PaddingCase {
  std::string pooling, impl;
};

class PaddingInvarianceTest : public ::testing::TestWithParam<PaddingCase> {};

// Video 21 (length 3) alone, then between longer neighbours in a batch padded to 7 frames:
// its logits and its parameter gradients (dlogits only on its row) must agree.
TEST_P(PaddingInvarianceTest, SameVideoAloneAndInPaddedBatch) {
  const PaddingCase& c = GetParam();
  auto alone =
      Build("two_stream", TinyOptions("two_stream", "moe", c.pooling, 2, c.impl), kClasses, 4);
  auto padded =
      Build("two_stream", TinyOptions("two_stream", "moe", c.pooling, 2, c.impl), kClasses, 4);
  ASSERT_TRUE(alone.model && padded.model);
  Batch one = TinyBatch("two_stream", {3}, 3, {21});
  Batch three = TinyBatch("two_stream", {7, 3, 5}, 7, {20, 21, 22});
  auto l1 = alone.model->Forward(one, Mode::kTrain);
  auto l3 = padded.model->Forward(three, Mode::kTrain);
  ASSERT_TRUE(l1.ok() && l3.ok());
  std::vector<float> d1 = SigmoidCrossEntropy(*l1, one).dlogits;
  std::vector<float> d3(3 * kClasses, 0.0f);
  std::copy(d1.begin(), d1.end(), d3.begin() + kClasses);
  for (int64_t c = 0; c < kClasses; ++c) EXPECT_NEAR(l1->data()[c], l3->data()[kClasses + c], 1e-5);
  ASSERT_TRUE(alone.model->Backward(one, Tensor({1, kClasses}, d1)).ok());
  ASSERT_TRUE(padded.model->Backward(three, Tensor({3, kClasses}, d3)).ok());
  for (const auto& block : alone.arena->blocks())
    for (int64_t i = 0; i < block.size; ++i) {
      const float a = alone.arena->grads()[block.offset + i],
                  b = padded.arena->grads()[block.offset + i];
      ASSERT_NEAR(a, b, 1e-5 + 1e-4 * std::abs(a)) << block.name << "[" << i << "]";
    }
}

INSTANTIATE_TEST_SUITE_P(
    Poolings, PaddingInvarianceTest,
    ::testing::Values(PaddingCase{"last", "gemm"}, PaddingCase{"mean", "gemm"},
                      PaddingCase{"max", "gemm"}, PaddingCase{"last", "dnnl_rnn"},
                      PaddingCase{"mean", "dnnl_rnn"}, PaddingCase{"max", "dnnl_rnn"}),
    [](const auto& info) { return info.param.pooling + "_" + info.param.impl; });

TEST(BiLstmModelTest, DeterministicUnderSeed) {
  auto a = Build("bilstm_video", TinyOptions("bilstm_video", "moe", "last", 1), kClasses, 9);
  auto b = Build("bilstm_video", TinyOptions("bilstm_video", "moe", "last", 1), kClasses, 9);
  auto c = Build("bilstm_video", TinyOptions("bilstm_video", "moe", "last", 1), kClasses, 10);
  auto values = [](const ParamArena& p) {
    return std::vector<float>(p.values().begin(), p.values().end());
  };
  EXPECT_EQ(values(*a.arena), values(*b.arena));
  EXPECT_NE(values(*a.arena), values(*c.arena));
  Batch batch = TinyBatch("bilstm_video", {2, 4}, 4, {1, 2});
  auto la = a.model->Forward(batch, Mode::kTrain), lb = b.model->Forward(batch, Mode::kTrain);
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_EQ(std::vector<float>(la->values().begin(), la->values().end()),
            std::vector<float>(lb->values().begin(), lb->values().end()));
}

// ModelContext::threads bounds the OpenMP team of the thread that runs the model (a trial of
// `reel tune` beside others), and the model computes the same logits with its share.
TEST(BiLstmModelTest, ThreadBudgetBoundsTheCallingThreadsTeam) {
  Batch batch = TinyBatch("bilstm_video", {2, 4}, 4, {1, 2});
  std::vector<float> all, one;
  int team_after = 0;
  std::thread([&] {
    auto a = Build("bilstm_video", TinyOptions("bilstm_video", "moe", "last", 1), kClasses, 9);
    auto la = a.model->Forward(batch, Mode::kTrain);
    ASSERT_TRUE(la.ok());
    all.assign(la->values().begin(), la->values().end());
  }).join();
  std::thread([&] {
    omp_set_num_threads(4);
    auto b = Build("bilstm_video", TinyOptions("bilstm_video", "moe", "last", 1), kClasses, 9, 1);
    auto lb = b.model->Forward(batch, Mode::kTrain);
    ASSERT_TRUE(lb.ok());
    team_after = omp_get_max_threads();
    one.assign(lb->values().begin(), lb->values().end());
  }).join();
  EXPECT_EQ(team_after, 1);
  ASSERT_EQ(all.size(), one.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_NEAR(all[i], one[i], 1e-5) << i;
}

TEST(BiLstmModelTest, PrimitivesAreCreatedOncePerShape) {
  auto built = Build("bilstm_audio", TinyOptions("bilstm_audio", "logistic", "last", 2, "dnnl_rnn"),
                     kClasses);
  Batch batch = TinyBatch("bilstm_audio", {4, 2}, 4, {1, 2});
  auto step = [&](const Batch& b) {
    auto logits = built.model->Forward(b, Mode::kTrain);
    ASSERT_TRUE(logits.ok());
    ASSERT_TRUE(
        built.model
            ->Backward(b, Tensor({b.size(), kClasses}, SigmoidCrossEntropy(*logits, b).dlogits))
            .ok());
  };
  step(batch);
  const auto first = built.model->cache_stats();
  EXPECT_EQ(first.misses, 4);  // 2 layers x 2 directions, one plan each
  for (int i = 0; i < 3; ++i) step(batch);
  const auto later = built.model->cache_stats();
  EXPECT_EQ(later.misses, first.misses);
  EXPECT_EQ(later.hits, first.hits + 3 * 8);           // forward + backward per LSTM per step
  step(TinyBatch("bilstm_audio", {3, 2}, 4, {1, 2}));  // longest video 3: a new shape
  EXPECT_EQ(built.model->cache_stats().misses, first.misses + 4);
}

TEST(BiLstmModelTest, BackwardNeedsATrainingForward) {
  auto built = Build("bilstm_audio", TinyOptions("bilstm_audio", "logistic", "last", 1), kClasses);
  Batch batch = TinyBatch("bilstm_audio", {2}, 2, {1});
  Tensor d({1, kClasses});
  EXPECT_EQ(built.model->Backward(batch, d).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(built.model->Forward(batch, Mode::kInfer).ok());
  EXPECT_EQ(built.model->Backward(batch, d).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(built.model->Forward(batch, Mode::kTrain).ok());
  EXPECT_EQ(built.model->Backward(batch, Tensor({2, kClasses})).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(built.model->Backward(batch, d).ok());
}

void ExpectInvalidNaming(const Result<Tensor>& r, const std::string& text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status();
}

TEST(BiLstmModelTest, BadInputsAreInvalidArgumentsNamingTheFeature) {
  auto built = Build("two_stream", TinyOptions("two_stream", "moe", "last", 1), kClasses);
  Batch good = TinyBatch("two_stream", {3, 2}, 3, {1, 2});
  ASSERT_TRUE(built.model->Forward(good, Mode::kTrain).ok());

  Batch missing = good;
  missing.features.erase("audio");
  ExpectInvalidNaming(built.model->Forward(missing, Mode::kTrain), "'audio'");

  Batch wide = TinyBatch("bilstm_video", {3, 2}, 3, {1, 2});
  AddFeature(wide, "audio", 5, 3, {3, 2}, {1, 2});
  ExpectInvalidNaming(built.model->Forward(wide, Mode::kTrain), "'audio' has width 5, want 4");

  Batch zero = good;
  zero.features["rgb"].lengths[1] = 0;
  ExpectInvalidNaming(built.model->Forward(zero, Mode::kTrain), "'rgb' of video 'v2' has length 0");

  Batch too_long = good;
  too_long.features["audio"].lengths[0] = 4;
  ExpectInvalidNaming(built.model->Forward(too_long, Mode::kInfer),
                      "'audio' of video 'v1' has length 4, want 1..3");

  Batch flat = good;
  flat.features["rgb"].values.Reshape({2, 18});
  ExpectInvalidNaming(built.model->Forward(flat, Mode::kTrain), "'rgb' has shape [2, 18]");
  // After every refusal the model still works.
  EXPECT_TRUE(built.model->Forward(good, Mode::kTrain).ok());
}

TEST(BiLstmModelTest, BadOptionsAreInvalidArgumentsNamingTheOption) {
  ModelContext context;
  auto make = [&](std::map<std::string, std::string> given) {
    auto o = ParseOptions(BiLstmOptions("rgb", 1024, 256), given);
    EXPECT_TRUE(o.ok());
    return BiLstmModel::Create("bilstm_video", *o, context);
  };
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"head", "svm"},
                                                        {"pooling", "median"},
                                                        {"hidden", "0"},
                                                        {"layers", "0"},
                                                        {"impl", "cudnn"},
                                                        {"experts", "0"}}) {
    auto m = make({{key, value}});
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find("'" + key + "'"), std::string::npos) << m.status();
  }
  auto o = ParseOptions(TwoStreamOptions(), {{"audio_feature", "rgb"}});
  auto same = BiLstmModel::Create("two_stream", *o, context);
  ASSERT_FALSE(same.ok());
  EXPECT_NE(same.status().message().find("'audio_feature'"), std::string::npos);
}

class SgdTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SgdTest, SgdStepsLowerTheLoss) {
  auto built =
      Build("bilstm_audio", TinyOptions("bilstm_audio", "moe", "mean", 1, GetParam()), kClasses, 5);
  Batch batch = TinyBatch("bilstm_audio", {5, 3, 4, 2}, 5, {31, 32, 33, 34});
  EXPECT_TRUE(SgdLowersLoss(*built.model, *built.arena, batch, 40, 4.0f, 0.5));
}

INSTANTIATE_TEST_SUITE_P(Impls, SgdTest, ::testing::Values("gemm", "dnnl_rnn"));

}  // namespace
}  // namespace reel::bilstm
