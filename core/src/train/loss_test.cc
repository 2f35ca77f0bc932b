#include "reel/core/loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace reel::core {
namespace {

// The textbook form in double: -[y log p + (1-y) log(1-p)], p = 1/(1+e^-x).
double DirectLoss(const std::vector<float>& x, const std::vector<std::vector<int>>& labels,
                  int64_t classes) {
  double total = 0;
  for (size_t b = 0; b < labels.size(); ++b)
    for (int64_t c = 0; c < classes; ++c) {
      double xv = x[b * classes + c];
      double p = 1.0 / (1.0 + std::exp(-xv));
      bool y = std::find(labels[b].begin(), labels[b].end(), c) != labels[b].end();
      total -= y ? std::log(p) : std::log(1.0 - p);
    }
  return total / static_cast<double>(labels.size());
}

struct Case {
  Tensor logits;
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> ids;
  std::vector<std::vector<int>> labels;
};

Case RandomCase(int64_t batch, int64_t classes, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  Case c;
  c.logits = Tensor({batch, classes});
  for (float& v : c.logits.values()) v = n(rng);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int> l;
    for (int64_t k = 0; k < classes; ++k)
      if (rng() % 3 == 0) l.push_back(static_cast<int>(k));
    for (int k : l) c.ids.push_back(k);
    c.offsets.push_back(static_cast<int64_t>(c.ids.size()));
    c.labels.push_back(l);
  }
  return c;
}

TEST(LossTest, MatchesDirectFormula) {
  Case c = RandomCase(4, 7, 2.0f, 1);
  auto r = SigmoidCrossEntropy(c.logits, c.offsets, c.ids);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> x(c.logits.values().begin(), c.logits.values().end());
  EXPECT_NEAR(r->loss, DirectLoss(x, c.labels, 7), 1e-5);
}

// A batch large enough to be split over the OpenMP threads (24 x 3000 logits): the same loss, and
// every gradient equal to (sigmoid(x) - y) / batch. (Not run under ThreadSanitizer, which does not
// see libgomp's barriers: scripts/test.sh.)
TEST(LossTest, LargeBatchOnOpenMpThreadsMatchesDirectFormula) {
  const int64_t batch = 24, classes = 3000;
  Case c = RandomCase(batch, classes, 2.0f, 3);
  auto r = SigmoidCrossEntropy(c.logits, c.offsets, c.ids);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> x(c.logits.values().begin(), c.logits.values().end());
  const double direct = DirectLoss(x, c.labels, classes);
  EXPECT_NEAR(r->loss, direct, 1e-6 * direct);
  int bad = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t k = 0; k < classes; ++k) {
      const double y = std::count(c.labels[b].begin(), c.labels[b].end(), k) > 0 ? 1.0 : 0.0;
      const double want = (1.0 / (1.0 + std::exp(-x[b * classes + k])) - y) / batch;
      if (std::abs(r->dlogits.data()[b * classes + k] - want) > 1e-7 && ++bad <= 5)
        ADD_FAILURE() << "dlogits[" << b << "][" << k
                      << "] = " << r->dlogits.data()[b * classes + k] << ", want " << want;
    }
}

TEST(LossTest, GradientMatchesFiniteDifferences) {
  Case c = RandomCase(3, 5, 1.5f, 2);
  auto r = SigmoidCrossEntropy(c.logits, c.offsets, c.ids);
  ASSERT_TRUE(r.ok());
  std::vector<float> x(c.logits.values().begin(), c.logits.values().end());
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-3;
    auto xp = x, xm = x;
    xp[i] += static_cast<float>(h);
    xm[i] -= static_cast<float>(h);
    double numeric = (DirectLoss(xp, c.labels, 5) - DirectLoss(xm, c.labels, 5)) / (2 * h);
    EXPECT_NEAR(r->dlogits.data()[i], numeric, 2e-4) << "element " << i;
  }
}

TEST(LossTest, StableForHugeLogits) {
  Tensor logits({1, 2}, std::vector<float>{1000.0f, -1000.0f});
  std::vector<int64_t> offsets{0, 1};
  std::vector<int32_t> ids{1};  // class 1 is true but scored -1000; class 0 false, scored 1000
  auto r = SigmoidCrossEntropy(logits, offsets, ids);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::isfinite(r->loss));
  EXPECT_NEAR(r->loss, 2000.0, 1e-3);
  EXPECT_FLOAT_EQ(r->dlogits.data()[0], 1.0f);
  EXPECT_FLOAT_EQ(r->dlogits.data()[1], -1.0f);
}

TEST(LossTest, RejectsLabelOutOfRange) {
  Tensor logits({1, 3});
  std::vector<int64_t> offsets{0, 1};
  std::vector<int32_t> ids{3};
  auto r = SigmoidCrossEntropy(logits, offsets, ids);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("label 3"), std::string::npos);
}

TEST(LossTest, RejectsShapeMismatch) {
  Tensor logits({2, 3});
  std::vector<int64_t> offsets{0, 1};
  std::vector<int32_t> ids{0};
  EXPECT_FALSE(SigmoidCrossEntropy(logits, offsets, ids).ok());
}

TEST(LossTest, SigmoidInPlace) {
  std::vector<float> v{0.0f, 2.0f, -2.0f, -100.0f};
  SigmoidInPlace(v);
  EXPECT_FLOAT_EQ(v[0], 0.5f);
  EXPECT_NEAR(v[1], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
  EXPECT_NEAR(v[2], 1.0 / (1.0 + std::exp(2.0)), 1e-7);
  EXPECT_GE(v[3], 0.0f);
}

}  // namespace
}  // namespace reel::core
