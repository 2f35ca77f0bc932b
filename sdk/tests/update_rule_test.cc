// The update rules of sdk/include/reel/update_rule.h against their textbook formulas, written out
// here in double precision, and their state round trip.
#include "reel/update_rule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace reel {
namespace {

using ::testing::HasSubstr;

constexpr size_t kN = 37;
constexpr int kSteps = 6;
constexpr double kLr = 0.05;

double Grad(int step, size_t i) {
  return std::sin(0.7 * static_cast<double>(i) + 1.3 * step) * (1.0 + 0.1 * step);
}
double Init(size_t i) { return std::cos(0.3 * static_cast<double>(i)) * 0.5; }

// The formulas as in the papers / torch.optim, one parameter at a time, in double precision.
std::vector<double> Reference(const UpdateRuleConfig& c) {
  std::vector<double> p(kN), s1(kN, c.rule == "adagrad" ? c.adagrad_initial : 0.0), s2(kN, 0.0);
  for (size_t i = 0; i < kN; ++i) p[i] = Init(i);
  for (int t = 1; t <= kSteps; ++t) {
    for (size_t i = 0; i < kN; ++i) {
      const double g = Grad(t, i) + c.weight_decay * p[i];
      if (c.rule == "sgd") {
        p[i] -= kLr * g;
      } else if (c.rule == "momentum") {
        s1[i] = c.momentum * s1[i] + g;  // velocity
        p[i] -= kLr * (c.nesterov ? g + c.momentum * s1[i] : s1[i]);
      } else if (c.rule == "adagrad") {
        s1[i] += g * g;
        p[i] -= kLr * g / (std::sqrt(s1[i]) + c.epsilon);
      } else if (c.rule == "adam") {
        s1[i] = c.beta1 * s1[i] + (1 - c.beta1) * g;
        s2[i] = c.beta2 * s2[i] + (1 - c.beta2) * g * g;
        const double m_hat = s1[i] / (1 - std::pow(c.beta1, t));
        const double v_hat = s2[i] / (1 - std::pow(c.beta2, t));
        p[i] -= kLr * m_hat / (std::sqrt(v_hat) + c.epsilon);
      }
    }
  }
  return p;
}

void Steps(UpdateRule& rule, std::vector<float>& p, int from_step, int to_step) {
  std::vector<float> g(kN);
  for (int t = from_step; t <= to_step; ++t) {
    for (size_t i = 0; i < kN; ++i) g[i] = static_cast<float>(Grad(t, i));
    rule.Apply(p, g, static_cast<float>(kLr));
  }
}

std::vector<float> InitialParams() {
  std::vector<float> p(kN);
  for (size_t i = 0; i < kN; ++i) p[i] = static_cast<float>(Init(i));
  return p;
}

UpdateRuleConfig Config(const std::map<std::string, std::string>& given) {
  auto o = ParseOptions(UpdateRuleOptions(), given);
  EXPECT_TRUE(o.ok()) << o.status();
  return UpdateRuleConfigFrom(*o);
}

struct RuleCase {
  std::string name;
  std::map<std::string, std::string> options;
};

class UpdateRuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(UpdateRuleTest, MatchesTheFormulaInDoublePrecision) {
  UpdateRuleConfig c = Config(GetParam().options);
  auto rule = MakeUpdateRule(c);
  ASSERT_TRUE(rule.ok()) << rule.status();
  std::vector<float> p = InitialParams();
  Steps(**rule, p, 1, kSteps);
  EXPECT_EQ((*rule)->steps(), kSteps);
  std::vector<double> want = Reference(c);
  for (size_t i = 0; i < kN; ++i)
    EXPECT_NEAR(p[i], want[i], 2e-5 * std::max(1.0, std::abs(want[i]))) << "parameter " << i;
  // The update did something: the test would notice a rule that ignores its gradients.
  EXPECT_GT(std::abs(want[0] - Init(0)), 1e-3);
}

TEST_P(UpdateRuleTest, SavedStateContinuesIdentically) {
  UpdateRuleConfig c = Config(GetParam().options);
  auto a = MakeUpdateRule(c);
  auto b = MakeUpdateRule(c);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> pa = InitialParams();
  Steps(**a, pa, 1, 3);
  std::string state = (*a)->SaveState();
  ASSERT_TRUE((*b)->RestoreState(state).ok());
  EXPECT_EQ((*b)->steps(), 3);
  std::vector<float> pb = pa;
  Steps(**a, pa, 4, kSteps);
  Steps(**b, pb, 4, kSteps);
  EXPECT_EQ(pa, pb);  // bit for bit
  EXPECT_EQ((*a)->SaveState(), (*b)->SaveState());
}

// A saved state taken apart (UpdateRule::ParseState) and cut in two at a parameter, each half
// encoded again (EncodeState) and restored into a rule of its own, continues on its half of the
// parameters bit for bit as the whole rule does on the whole (a parameter server re-cutting its
// shards); and the whole state encoded again is the saved one.
TEST_P(UpdateRuleTest, AStateCutInTwoContinuesAsTheWhole) {
  UpdateRuleConfig c = Config(GetParam().options);
  auto whole = MakeUpdateRule(c);
  ASSERT_TRUE(whole.ok());
  std::vector<float> p = InitialParams();
  Steps(**whole, p, 1, 3);
  const std::string saved = (*whole)->SaveState();
  Result<UpdateRule::State> state = UpdateRule::ParseState(saved);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->steps, 3);
  for (int k = 0; k < 2; ++k)
    EXPECT_EQ(state->moments[k].size(), k < (*whole)->state_vectors() ? kN : 0) << k;
  EXPECT_EQ(UpdateRule::EncodeState(state->steps, state->moments[0], state->moments[1]), saved);

  constexpr size_t kCut = 16;
  auto half = [&](size_t from, size_t n) {
    auto cut = [&](const std::vector<float>& m) {
      return m.empty() ? std::span<const float>() : std::span<const float>(m).subspan(from, n);
    };
    return UpdateRule::EncodeState(state->steps, cut(state->moments[0]), cut(state->moments[1]));
  };
  auto first = MakeUpdateRule(c);
  auto second = MakeUpdateRule(c);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE((*first)->RestoreState(half(0, kCut)).ok());
  ASSERT_TRUE((*second)->RestoreState(half(kCut, kN - kCut)).ok());
  std::vector<float> halves = p;
  std::vector<float> g(kN);
  for (int t = 4; t <= kSteps; ++t) {
    for (size_t i = 0; i < kN; ++i) g[i] = static_cast<float>(Grad(t, i));
    (*whole)->Apply(p, g, static_cast<float>(kLr));
    (*first)->Apply(std::span(halves).first(kCut), std::span<const float>(g).first(kCut),
                    static_cast<float>(kLr));
    (*second)->Apply(std::span(halves).subspan(kCut), std::span<const float>(g).subspan(kCut),
                     static_cast<float>(kLr));
  }
  EXPECT_EQ(halves, p);
  EXPECT_EQ((*second)->steps(), kSteps);
}

// A state cut short or padded is DataLoss when taken apart, as when restored.
TEST(UpdateRule, ParseStateRefusesTruncatedAndPaddedStates) {
  const std::vector<float> m = {1, 2, 3};
  const std::string state = UpdateRule::EncodeState(4, m, {});
  EXPECT_EQ(UpdateRule::ParseState(state.substr(0, state.size() - 1)).status().code(),
            StatusCode::kDataLoss);
  EXPECT_THAT(UpdateRule::ParseState(state + "x").status().message(), HasSubstr("trailing"));
  Result<UpdateRule::State> ok = UpdateRule::ParseState(state);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->moments[0], m);
  EXPECT_TRUE(ok->moments[1].empty());
}

// One update applied in pieces, in any order (as a parameter server applies a push chunk by
// chunk), gives the parameters and state of the whole update bit for bit: over a span long
// enough for whole blocks of the vectorised loop, pieces at block boundaries and inside blocks.
TEST_P(UpdateRuleTest, AnUpdateInPiecesEqualsTheWholeUpdate) {
  UpdateRuleConfig c = Config(GetParam().options);
  auto whole = MakeUpdateRule(c);
  auto parts = MakeUpdateRule(c);
  ASSERT_TRUE(whole.ok() && parts.ok());
  constexpr size_t n = 64 * 5 + 29;
  const std::vector<std::pair<size_t, size_t>> pieces = {{128, 192}, {0, 64},    {192, 200},
                                                         {64, 128},  {200, 331}, {331, n}};
  std::vector<float> pw(n), pp(n), g(n);
  for (size_t i = 0; i < n; ++i) pw[i] = pp[i] = static_cast<float>(Init(i));
  for (int t = 1; t <= 3; ++t) {
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(Grad(t, i));
    (*whole)->Apply(pw, g, static_cast<float>(kLr));
    (*parts)->BeginUpdate(n);
    for (auto [from, to] : pieces)
      (*parts)->ApplyPart(std::span(pp).subspan(from, to - from),
                          std::span<const float>(g).subspan(from, to - from),
                          static_cast<float>(kLr), from);
  }
  EXPECT_EQ(pw, pp);
  EXPECT_EQ((*parts)->steps(), 3);
  EXPECT_EQ((*whole)->SaveState(), (*parts)->SaveState());
  EXPECT_NE(pw[0], static_cast<float>(Init(0)));
}

// An update in pieces taken back half way (its input stopped arriving) leaves the parameters
// and the state as they were before it, and the next update goes on as if it never began.
TEST_P(UpdateRuleTest, AnUpdateTakenBackHalfWayLeavesNoTrace) {
  UpdateRuleConfig c = Config(GetParam().options);
  auto taken = MakeUpdateRule(c);
  auto clean = MakeUpdateRule(c);
  ASSERT_TRUE(taken.ok() && clean.ok());
  std::vector<float> pt = InitialParams(), pc = InitialParams();
  Steps(**taken, pt, 1, 2);
  Steps(**clean, pc, 1, 2);
  const std::vector<float> before = pt;
  std::vector<float> g(kN), kept(kN);
  for (size_t i = 0; i < kN; ++i) g[i] = static_cast<float>(Grad(3, i));
  (*taken)->BeginUpdate(kN);
  const int vectors = (*taken)->state_vectors();
  std::vector<std::vector<float>> kept_state(static_cast<size_t>(vectors), std::vector<float>(kN));
  // Pieces [0, 16) and [16, 30) applied, [30, kN) never arrived.
  for (auto [from, to] : {std::pair<size_t, size_t>{0, 16}, {16, 30}}) {
    for (int k = 0; k < vectors; ++k)
      (*taken)->CopyState(k, from, std::span(kept_state[k]).subspan(from, to - from));
    std::copy(pt.begin() + from, pt.begin() + to, kept.begin() + from);
    (*taken)->ApplyPart(std::span(pt).subspan(from, to - from),
                        std::span<const float>(g).subspan(from, to - from), static_cast<float>(kLr),
                        from);
  }
  EXPECT_NE(pt, before);
  for (int k = 0; k < vectors; ++k)
    (*taken)->SetState(k, 0, std::span<const float>(kept_state[k]).subspan(0, 30));
  std::copy(kept.begin(), kept.begin() + 30, pt.begin());
  (*taken)->CancelUpdate();
  EXPECT_EQ(pt, before);
  EXPECT_EQ((*taken)->SaveState(), (*clean)->SaveState());
  Steps(**taken, pt, 3, kSteps);
  Steps(**clean, pc, 3, kSteps);
  EXPECT_EQ(pt, pc);
}

TEST_P(UpdateRuleTest, TruncatedOrPaddedStateIsDataLoss) {
  auto rule = MakeUpdateRule(Config(GetParam().options));
  ASSERT_TRUE(rule.ok());
  std::vector<float> p = InitialParams();
  Steps(**rule, p, 1, 2);
  const std::string state = (*rule)->SaveState();
  auto fresh = MakeUpdateRule(Config(GetParam().options));
  for (size_t cut : {size_t{0}, size_t{5}, sizeof(int64_t), sizeof(int64_t) + 3, state.size() / 2,
                     state.size() - 1}) {
    if (cut >= state.size()) continue;
    Status s = (*fresh)->RestoreState(std::string_view(state).substr(0, cut));
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << "cut at " << cut << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("truncated"));
  }
  Status padded = (*fresh)->RestoreState(state + "x");
  EXPECT_EQ(padded.code(), StatusCode::kDataLoss) << padded;
  EXPECT_EQ((*fresh)->steps(), 0);  // failed restores left the rule untouched
}

// Over more than two 64K-float chunks, with a tail after the last whole 64-float block: the
// fused pass leaves parameters and state as Apply() does, bit for bit, and returns what
// SumOfSquares gives for the gradient, bit for bit, close to the sum taken in long double.
TEST_P(UpdateRuleTest, ApplySummingSquaresIsApplyPlusTheGradientsSquaredNorm) {
  UpdateRuleConfig c = Config(GetParam().options);
  auto plain = MakeUpdateRule(c);
  auto fused = MakeUpdateRule(c);
  ASSERT_TRUE(plain.ok() && fused.ok());
  const size_t n = 2 * 65536 + 64 * 5 + 37;
  std::vector<float> pa(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    pa[i] = static_cast<float>(Init(i));
    g[i] = static_cast<float>(Grad(1, i));
  }
  std::vector<float> pb = pa;
  for (int step = 0; step < 3; ++step) {
    (*plain)->Apply(pa, g, static_cast<float>(kLr));
    const double sum = (*fused)->ApplySummingSquares(pb, g, static_cast<float>(kLr));
    EXPECT_EQ(sum, SumOfSquares(g));  // bit for bit
    long double want = 0;
    for (float x : g) want += static_cast<long double>(x) * x;
    EXPECT_NEAR(sum, static_cast<double>(want), 1e-12 * static_cast<double>(want));
  }
  EXPECT_EQ(pa, pb);  // bit for bit
  EXPECT_EQ((*plain)->SaveState(), (*fused)->SaveState());
  EXPECT_NE(pa[n - 1], static_cast<float>(Init(n - 1)));  // the tail was updated
}

INSTANTIATE_TEST_SUITE_P(
    Rules, UpdateRuleTest,
    ::testing::Values(RuleCase{"sgd", {{"rule", "sgd"}}},
                      RuleCase{"sgd_weight_decay", {{"rule", "sgd"}, {"weight_decay", "0.01"}}},
                      RuleCase{"momentum", {{"rule", "momentum"}, {"momentum", "0.8"}}},
                      RuleCase{"nesterov", {{"rule", "momentum"}, {"nesterov", "true"}}},
                      RuleCase{"adagrad", {{"rule", "adagrad"}}},
                      RuleCase{"adagrad_weight_decay",
                               {{"rule", "adagrad"}, {"weight_decay", "0.1"}}},
                      RuleCase{"adam", {{"rule", "adam"}}},
                      RuleCase{"adam_custom",
                               {{"rule", "adam"},
                                {"beta1", "0.8"},
                                {"beta2", "0.99"},
                                {"epsilon", "1e-3"},
                                {"weight_decay", "0.01"}}}),
    [](const ::testing::TestParamInfo<RuleCase>& info) { return info.param.name; });

TEST(UpdateRule, UnknownRuleIsInvalidArgumentNamingIt) {
  UpdateRuleConfig c;
  c.rule = "rmsprop";
  auto r = MakeUpdateRule(c);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("rmsprop"));
}

TEST(UpdateRule, CorruptMomentCountIsDataLossNotAnAllocation) {
  auto rule = MakeUpdateRule(Config({{"rule", "adam"}}));
  std::vector<float> p = InitialParams();
  Steps(**rule, p, 1, 1);
  std::string state = (*rule)->SaveState();
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(state.data() + sizeof(int64_t), &huge, sizeof huge);
  EXPECT_EQ((*rule)->RestoreState(state).code(), StatusCode::kDataLoss);
}

// A NaN or an infinity anywhere in the gradient makes its sum of squares non-finite, from
// ApplySummingSquares as from SumOfSquares: at the first element, the last one of a whole 64-float
// block, the tail after the last whole block, either side of a 64K chunk's edge, the last one;
// the largest finite floats do not overflow it.
TEST(UpdateRule, TheSumOfSquaresFindsEveryNonFiniteGradient) {
  const size_t n = 2 * 65536 + 64 * 5 + 37;
  const size_t tail = n - n % 64;
  std::vector<float> g(n, 0.25f);
  g[1] = std::numeric_limits<float>::max();
  g[2] = -std::numeric_limits<float>::max();
  EXPECT_TRUE(std::isfinite(SumOfSquares(g)));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()})
    for (size_t at :
         {size_t{0}, size_t{63}, tail, tail + 17, size_t{65535}, size_t{65536}, n - 1}) {
      std::vector<float> w = g;
      w[at] = bad;
      EXPECT_FALSE(std::isfinite(SumOfSquares(w))) << bad << " at " << at;
      auto rule = MakeUpdateRule(Config({{"rule", "adam"}}));
      ASSERT_TRUE(rule.ok());
      std::vector<float> p(n, 1.0f);
      EXPECT_FALSE(std::isfinite((*rule)->ApplySummingSquares(p, w, 0.01f))) << bad << " at " << at;
    }
  EXPECT_EQ(SumOfSquares({}), 0.0);
}

}  // namespace
}  // namespace reel
