// The MoE head's vectorised kernels, compiled once per instruction set, each against a
// double-precision reference (logits from log1p/exp of the formulas in heads.h, gradients by
// central differences of that reference), on ordinary and extreme pre-activations and on item
// counts that leave a partial block.
#include "../src/moe_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "reel/layers/vector_isa.h"

namespace reel::layers {
namespace {

double LogSumExp(const std::vector<double>& v) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}
double LogSigmoid(double a) { return std::min(a, 0.0) - std::log1p(std::exp(-std::abs(a))); }

// One item's logit: z [E + 1], a [E].
double ReferenceLogit(const std::vector<double>& z, const std::vector<double>& a) {
  const size_t e = a.size();
  const double lse_z = LogSumExp(z);
  std::vector<double> u(e), v(e + 1);
  v[0] = z[0] - lse_z;
  for (size_t k = 0; k < e; ++k) {
    u[k] = z[k + 1] - lse_z + LogSigmoid(a[k]);
    v[k + 1] = z[k + 1] - lse_z + LogSigmoid(-a[k]);
  }
  return LogSumExp(u) - LogSumExp(v);
}

struct Kernels {
  std::string name;
  std::function<void(const MoeItems&, float*, float*, float*)> logits;
};

// Every instruction set this CPU runs, and the dispatching entry points (threads from 8192 items).
std::vector<Kernels> Runnable() {
  std::vector<Kernels> k{{"baseline", moe_base::Logits}};
  const VectorIsa isa = DetectVectorIsa();
  if (isa == VectorIsa::kAvx2 || isa == VectorIsa::kAvx512) k.push_back({"avx2", moe_avx2::Logits});
  if (isa == VectorIsa::kAvx512) k.push_back({"avx512", moe_avx512::Logits});
  k.push_back({"MoeLogits", [](const MoeItems& items, float* logits, float* dz, float* da) {
                 MoeLogits(items, logits, dz, da);
               }});
  return k;
}

struct Case {
  int64_t n, experts;
  float scale;  // pre-activations uniform in [-scale, scale]
};

class MoeKernelsTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeKernelsTest, EveryInstructionSetMatchesTheDoubleReference) {
  const Case c = GetParam();
  const int64_t e1 = c.experts + 1;
  std::mt19937 rng(static_cast<unsigned>(c.n * 131 + c.experts));
  std::uniform_real_distribution<float> dist(-c.scale, c.scale);
  std::vector<float> z(static_cast<size_t>(c.n * e1)), a(static_cast<size_t>(c.n * c.experts)),
      d(static_cast<size_t>(c.n));
  for (float& v : z) v = dist(rng);
  for (float& v : a) v = dist(rng);
  for (float& v : d) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  const MoeItems items{z.data(), a.data(), c.n, c.experts};

  for (const Kernels& k : Runnable()) {
    SCOPED_TRACE(k.name);
    std::vector<float> logits(static_cast<size_t>(c.n), NAN), unit_dz(z.size(), NAN),
        unit_da(a.size(), NAN), dz(z.size(), NAN), da(a.size(), NAN), plain(logits);
    k.logits(items, logits.data(), unit_dz.data(), unit_da.data());
    k.logits(items, plain.data(), nullptr, nullptr);  // the same logits without derivatives
    ASSERT_EQ(plain, logits);
    MoeLogitGrads(c.n, c.experts, unit_dz.data(), unit_da.data(), d.data(), dz.data(), da.data());
    for (int64_t i = 0; i < c.n; ++i) {
      std::vector<double> zi(z.begin() + i * e1, z.begin() + (i + 1) * e1),
          ai(a.begin() + i * c.experts, a.begin() + (i + 1) * c.experts);
      const double want = ReferenceLogit(zi, ai);
      ASSERT_NEAR(logits[static_cast<size_t>(i)], want, 2e-5 * (1 + std::abs(want)))
          << "item " << i;
      // d logit / d x by central differences of the double reference, times dlogit.
      auto diff = [&](std::vector<double>& x, size_t j) {
        const double h = 1e-5 * std::max(1.0, std::abs(x[j])), keep = x[j];
        x[j] = keep + h;
        const double up = ReferenceLogit(zi, ai);
        x[j] = keep - h;
        const double down = ReferenceLogit(zi, ai);
        x[j] = keep;
        return d[static_cast<size_t>(i)] * (up - down) / (2 * h);
      };
      for (size_t j = 0; j < zi.size(); ++j)
        ASSERT_NEAR(dz[static_cast<size_t>(i * e1) + j], diff(zi, j), 1e-4)
            << "item " << i << " dz " << j;
      for (size_t j = 0; j < ai.size(); ++j)
        ASSERT_NEAR(da[static_cast<size_t>(i * c.experts) + j], diff(ai, j), 1e-4)
            << "item " << i << " da " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeKernelsTest,
                         ::testing::Values(Case{1, 1, 3}, Case{17, 2, 3}, Case{40, 4, 8},
                                           Case{33, 2, 60}, Case{16, 3, 0.001f},
                                           // split over the threads, a part not a multiple of 16
                                           Case{8193, 2, 3}));

}  // namespace
}  // namespace reel::layers
