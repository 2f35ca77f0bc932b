// Tests of the shared layers: finite-difference gradients, the mixture-of-experts logit against a
// direct double-precision formula, pooling and reversal index maps, deterministic init.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reel/layers/dense.h"
#include "reel/layers/heads.h"
#include "reel/layers/init.h"
#include "reel/layers/input.h"
#include "reel/layers/sequence.h"
#include "reel/layers/testing.h"

namespace reel::layers {
namespace {

using testing::CheckGradient;
using testing::RandomVector;

// Loss = sum(r * y) over a head's output, in double.
double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(DenseTest, GradientsMatchFiniteDifferences) {
  const int64_t batch = 3, in = 5, out = 4;
  ParamArena arena;
  Dense dense("d", in, out, true);
  ASSERT_TRUE(dense.Declare(arena).ok());
  arena.Finalize();
  dense.Initialize(1);
  FillUniform(arena.values(1), 0.5f, 2, "bias");  // a non-zero bias so it is exercised
  std::vector<float> x = RandomVector(batch * in, 3), r = RandomVector(batch * out, 4);
  std::vector<float> y(batch * out), dx(batch * in);
  auto loss = [&] {
    dense.Forward(x.data(), batch, y.data());
    return Dot(y, r);
  };
  loss();
  dense.Backward(x.data(), r.data(), batch, dx.data());
  EXPECT_TRUE(CheckGradient(arena.values(0), arena.grads(0), loss, 1e-2f, 1e-3, 1e-4, 24, 1, "w"));
  EXPECT_TRUE(CheckGradient(arena.values(1), arena.grads(1), loss, 1e-2f, 1e-3, 1e-4, 24, 1, "b"));
  EXPECT_TRUE(CheckGradient(x, dx, loss, 1e-2f, 1e-3, 1e-4, 24, 1, "x"));
}

TEST(DenseTest, BackwardOverwritesGradients) {
  ParamArena arena;
  Dense dense("d", 2, 2, true);
  ASSERT_TRUE(dense.Declare(arena).ok());
  arena.Finalize();
  dense.Initialize(1);
  std::vector<float> x = {1, 2}, dy = {1, 1}, y(2);
  dense.Forward(x.data(), 1, y.data());
  dense.Backward(x.data(), dy.data(), 1, nullptr);
  std::vector<float> first(arena.grads().begin(), arena.grads().end());
  dense.Backward(x.data(), dy.data(), 1, nullptr);
  EXPECT_EQ(first, std::vector<float>(arena.grads().begin(), arena.grads().end()));
}

Options HeadOpts(const std::string& head, int64_t experts) {
  return *ParseOptions(HeadOptions("logistic"),
                       {{"head", head}, {"experts", std::to_string(experts)}});
}

TEST(MoeHeadTest, LogitEqualsLogOddsOfTheMixture) {
  const int64_t batch = 2, in = 3, classes = 4, experts = 3;
  ParamArena arena;
  MoeHead head("moe", in, classes, experts);
  ASSERT_TRUE(head.Declare(arena).ok());
  arena.Finalize();
  head.Initialize(5);
  FillUniform(arena.values(2), 1.0f, 6, "expert bias");
  std::vector<float> x = RandomVector(batch * in, 7, 2.0f), logits(batch * classes);
  head.Forward(x.data(), batch, logits.data(), Mode::kTrain);
  auto w_g = arena.values(0), w_e = arena.values(1), b_e = arena.values(2);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<double> z(experts + 1, 0.0);
      double zmax = -1e300, sum = 0, p = 0;
      for (int64_t k = 0; k <= experts; ++k) {
        for (int64_t i = 0; i < in; ++i)
          z[k] += static_cast<double>(x[b * in + i]) *
                  w_g[i * classes * (experts + 1) + c * (experts + 1) + k];
        zmax = std::max(zmax, z[k]);
      }
      for (double& v : z) sum += (v = std::exp(v - zmax));
      for (int64_t e = 0; e < experts; ++e) {
        double a = b_e[c * experts + e];
        for (int64_t i = 0; i < in; ++i)
          a += static_cast<double>(x[b * in + i]) * w_e[i * classes * experts + c * experts + e];
        p += z[e + 1] / sum / (1 + std::exp(-a));
      }
      EXPECT_NEAR(logits[b * classes + c], std::log(p / (1 - p)), 1e-4) << b << "," << c;
    }
}

TEST(MoeHeadTest, GradientsMatchFiniteDifferences) {
  const int64_t batch = 3, in = 4, classes = 3, experts = 2;
  ParamArena arena;
  MoeHead head("moe", in, classes, experts);
  ASSERT_TRUE(head.Declare(arena).ok());
  arena.Finalize();
  head.Initialize(8);
  FillUniform(arena.values(2), 1.0f, 9, "expert bias");
  std::vector<float> x = RandomVector(batch * in, 10), r = RandomVector(batch * classes, 11);
  std::vector<float> y(batch * classes), dx(batch * in);
  auto loss = [&] {
    head.Forward(x.data(), batch, y.data(), Mode::kTrain);
    return Dot(y, r);
  };
  loss();
  head.Backward(x.data(), r.data(), batch, dx.data());
  for (int id = 0; id < 3; ++id)
    EXPECT_TRUE(CheckGradient(arena.values(id), arena.grads(id), loss, 1e-2f, 2e-3, 1e-4, 30, id,
                              arena.block(id).name));
  EXPECT_TRUE(CheckGradient(x, dx, loss, 1e-2f, 2e-3, 1e-4, 30, 3, "x"));
}

TEST(MoeHeadTest, ExtremeLogitsStayFinite) {
  ParamArena arena;
  MoeHead head("moe", 1, 1, 2);
  ASSERT_TRUE(head.Declare(arena).ok());
  arena.Finalize();
  for (float& v : arena.values()) v = 1.0f;
  for (float xv : {-200.0f, 200.0f}) {
    float x = xv, logit = 0, dx = 0, d = 1;
    head.Forward(&x, 1, &logit, Mode::kTrain);
    head.Backward(&x, &d, 1, &dx);
    EXPECT_TRUE(std::isfinite(logit)) << xv;
    EXPECT_TRUE(std::isfinite(dx)) << xv;
    for (float g : arena.grads()) EXPECT_TRUE(std::isfinite(g)) << xv;
  }
}

TEST(HeadFactoryTest, BuildsKnownHeadsAndRejectsOthers) {
  EXPECT_TRUE(MakeHead(HeadOpts("logistic", 2), "h", 3, 4).ok());
  EXPECT_TRUE(MakeHead(HeadOpts("moe", 2), "h", 3, 4).ok());
  auto bad = MakeHead(HeadOpts("svm", 2), "h", 3, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'head'"), std::string::npos);
  auto zero = MakeHead(HeadOpts("moe", 0), "h", 3, 4);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("'experts'"), std::string::npos);
}

TEST(PoolingTest, GradientsMatchFiniteDifferencesAndIgnorePadding) {
  const int64_t steps = 4, batch = 3, hidden = 2;
  const std::vector<int32_t> lengths = {4, 1, 2};
  for (Pooling p : {Pooling::kLast, Pooling::kMean, Pooling::kMax}) {
    std::vector<float> x = RandomVector(steps * batch * hidden, 12);
    const int64_t y_ld = hidden + 3, col = 1;  // pooled into the middle of a wider row
    std::vector<float> r = RandomVector(batch * y_ld, 13), y(batch * y_ld, 0.0f);
    std::vector<float> dx(x.size());
    std::vector<int32_t> argmax(batch * hidden);
    auto loss = [&] {
      PoolForward(p, x.data(), steps, batch, hidden, lengths, y.data(), y_ld, col, argmax.data());
      return Dot(y, r);
    };
    loss();
    PoolBackward(p, r.data(), y_ld, col, steps, batch, hidden, lengths, argmax.data(), dx.data());
    EXPECT_TRUE(CheckGradient(x, dx, loss, 1e-3f, 1e-3, 1e-4, 100, 1, "x"));
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t b = 0; b < batch; ++b)
        if (t >= lengths[b]) {
          for (int64_t h = 0; h < hidden; ++h) EXPECT_EQ(dx[(t * batch + b) * hidden + h], 0.0f);
        }
  }
}

TEST(PoolingTest, ParsesNames) {
  EXPECT_EQ(*ParsePooling("last"), Pooling::kLast);
  EXPECT_EQ(*ParsePooling("mean"), Pooling::kMean);
  EXPECT_EQ(*ParsePooling("max"), Pooling::kMax);
  auto bad = ParsePooling("median");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'pooling'"), std::string::npos);
}

TEST(SequenceTest, ReversesWithinEachLength) {
  // Batch [B=2, T=3, D=1]: video 0 = 1 2 3, video 1 = 4 5 (padded with 0).
  const std::vector<float> btd = {1, 2, 3, 4, 5, 0};
  const std::vector<int32_t> lengths = {3, 2};
  std::vector<float> fwd(6, -1), rev(6, -1), back(6, -1);
  BtdToTbd(btd.data(), 2, 3, 1, lengths, 3, false, fwd.data());
  BtdToTbd(btd.data(), 2, 3, 1, lengths, 3, true, rev.data());
  EXPECT_EQ(fwd, (std::vector<float>{1, 4, 2, 5, 3, 0}));
  EXPECT_EQ(rev, (std::vector<float>{3, 5, 2, 4, 1, 0}));
  ReverseTbd(rev.data(), 3, 2, 1, lengths, back.data());
  EXPECT_EQ(back, fwd);
  std::vector<float> shorter(4, -1);  // trimmed to 2 steps
  BtdToTbd(btd.data(), 2, 3, 1, std::vector<int32_t>{2, 2}, 2, true, shorter.data());
  EXPECT_EQ(shorter, (std::vector<float>{2, 5, 1, 4}));
}

TEST(InputTest, ModelsRunOnlyOnAFinalizedArena) {
  ParamArena arena;
  const ParamArena* none = nullptr;
  for (const ParamArena* a : {none, static_cast<const ParamArena*>(&arena)}) {
    Status s = RequireFinalizedArena(a, "moe", "Forward");
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(), "model 'moe': Forward() before the arena is finalized");
  }
  arena.Finalize();
  EXPECT_TRUE(RequireFinalizedArena(&arena, "moe", "Forward").ok());
}

TEST(InputTest, BackwardNeedsATrainingForwardAndDlogitsOfItsShape) {
  Tensor dlogits({4, 3});
  Status s = RequireBackwardInput("moe", false, dlogits, 4, 3);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "model 'moe': Backward() without a training Forward()");
  s = RequireBackwardInput("moe", true, dlogits, 4, 5);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "model 'moe': dlogits have shape [4, 3], want [4, 5]");
  EXPECT_EQ(RequireBackwardInput("moe", true, Tensor({12}), 4, 3).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(RequireBackwardInput("moe", true, dlogits, 4, 3).ok());
}

TEST(InitTest, DependsOnSeedAndNameOnly) {
  std::vector<float> a(16), b(16), c(16), d(16);
  FillUniform(a, 0.1f, 42, "x/w");
  FillUniform(b, 0.1f, 42, "x/w");
  FillUniform(c, 0.1f, 43, "x/w");
  FillUniform(d, 0.1f, 42, "y/w");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  for (float v : a) EXPECT_LE(std::abs(v), 0.1f);
}

}  // namespace
}  // namespace reel::layers
