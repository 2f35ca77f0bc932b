// bf16 conversion (round to nearest even, NaN kept, denormals to zero, the vector path equal to
// the scalar one at every tail length) and GemmBf16 against a double-precision product of the
// same bf16 inputs, for every transpose, stride and accumulate combination.
#include "reel/layers/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

namespace reel::layers {
namespace {

float Bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(Bf16Test, RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(ToBf16(-2.0f), 0xc000);
  // Halfway between 0x3f80 and 0x3f81: to the even one; just past halfway: up.
  EXPECT_EQ(ToBf16(Bits(0x3f808000u)), 0x3f80);
  EXPECT_EQ(ToBf16(Bits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(ToBf16(Bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(ToBf16(Bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(ToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(ToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(ToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the largest
  EXPECT_TRUE(std::isnan(FromBf16(ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(FromBf16(ToBf16(Bits(0x7f800001u)))));  // a NaN that would round to inf
  EXPECT_EQ(ToBf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(ToBf16(-std::numeric_limits<float>::denorm_min()), 0x8000);
  for (float f : {0.5f, 3.0f, -0.15625f, std::ldexp(1.0f, -100), std::ldexp(-1.5f, 100)})
    EXPECT_EQ(FromBf16(ToBf16(f)), f) << f;
}

TEST(Bf16Test, ArrayConversionEqualsTheScalarOneAtEveryLength) {
  std::mt19937 rng(7);
  std::vector<float> in(80);
  for (float& x : in) x = std::uniform_real_distribution<float>(-4, 4)(rng);
  in[3] = std::numeric_limits<float>::quiet_NaN();
  in[17] = std::numeric_limits<float>::denorm_min();
  in[18] = Bits(0x3f808000u);
  in[40] = -std::numeric_limits<float>::infinity();
  for (int64_t n = 0; n <= 80; ++n) {
    std::vector<bf16_t> out(static_cast<size_t>(n) + 1, 0x1234);
    ToBf16(in.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ToBf16(in[i])) << "n " << n << " i " << i;
    EXPECT_EQ(out[n], 0x1234) << "wrote past n = " << n;
  }
  // Rows with strides: only the block's columns are written.
  std::vector<bf16_t> rows(3 * 10, 0x1234);
  ToBf16Rows(in.data(), 9, 3, 7, rows.data(), 10);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 10; ++c)
      EXPECT_EQ(rows[r * 10 + c], c < 7 ? ToBf16(in[r * 9 + c]) : 0x1234) << r << "," << c;
}

struct GemmCase {
  bool ta, tb, accumulate;
  int64_t m, n, k;
};

class GemmBf16Test : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmBf16Test, EqualsTheDoubleProductOfTheSameBf16Inputs) {
  if (!CpuHasBf16()) GTEST_SKIP() << "this CPU has no AVX-512 BF16; GemmBf16 requires it";
  const GemmCase& c = GetParam();
  std::mt19937 rng(11);
  auto fill = [&](int64_t rows, int64_t ld) {
    std::vector<bf16_t> v(static_cast<size_t>(rows * ld));
    for (auto& x : v) x = ToBf16(std::uniform_real_distribution<float>(-1, 1)(rng));
    return v;
  };
  // Stored shapes (row-major): A is [m, k] or, transposed, [k, m]; B [k, n] or [n, k]. Strides
  // are wider than the rows, so a stride mix-up reads the wrong values.
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int64_t lda = a_cols + 3, ldb = b_cols + 5, ldc = c.n + 2;
  const std::vector<bf16_t> a = fill(a_rows, lda), b = fill(b_rows, ldb);
  std::vector<float> out(static_cast<size_t>(c.m * ldc));
  for (size_t i = 0; i < out.size(); ++i) out[i] = 0.25f * static_cast<float>(i % 5);
  const std::vector<float> before = out;
  GemmBf16(c.ta, c.tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, c.accumulate, out.data(), ldc);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i * ldc + j);
      if (j >= c.n) {
        ASSERT_EQ(out[at], before[at]) << "wrote past column n at " << i << "," << j;
        continue;
      }
      double want = c.accumulate ? before[at] : 0.0;
      for (int64_t p = 0; p < c.k; ++p)
        want += static_cast<double>(FromBf16(c.ta ? a[p * lda + i] : a[i * lda + p])) *
                FromBf16(c.tb ? b[j * ldb + p] : b[p * ldb + j]);
      ASSERT_NEAR(out[at], want, 1e-5 * (1 + c.k)) << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmBf16Test,
                         ::testing::Values(GemmCase{false, false, false, 33, 40, 70},
                                           GemmCase{false, false, true, 5, 64, 16},
                                           GemmCase{true, false, false, 24, 40, 133},
                                           GemmCase{false, true, true, 17, 24, 64},
                                           GemmCase{true, true, false, 8, 9, 10},
                                           GemmCase{false, false, false, 1, 1, 1},
                                           GemmCase{false, false, true, 4, 6, 0},
                                           GemmCase{false, false, false, 4, 6, 0}),
                         [](const auto& info) {
                           const GemmCase& c = info.param;
                           return std::string(c.ta ? "T" : "N") + (c.tb ? "T" : "N") +
                                  (c.accumulate ? "_acc" : "") + "_" + std::to_string(c.m) + "x" +
                                  std::to_string(c.n) + "x" + std::to_string(c.k);
                         });

// The primitives are shared by the process: products on several threads at once (the encoder's
// two directions, a thread per layer) each get their own result.
TEST(GemmBf16Threads, ConcurrentProductsEqualSerialOnes) {
  if (!CpuHasBf16()) GTEST_SKIP() << "this CPU has no AVX-512 BF16; GemmBf16 requires it";
  constexpr int kThreads = 4;
  constexpr int64_t kM = 19, kN = 48, kK = 40;
  std::vector<std::vector<bf16_t>> a(kThreads), b(kThreads);
  std::vector<std::vector<float>> serial(kThreads), parallel(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    std::mt19937 rng(100 + t);
    for (int64_t i = 0; i < kM * kK; ++i)
      a[t].push_back(ToBf16(std::uniform_real_distribution<float>(-1, 1)(rng)));
    for (int64_t i = 0; i < kK * kN; ++i)
      b[t].push_back(ToBf16(std::uniform_real_distribution<float>(-1, 1)(rng)));
    serial[t].assign(kM * kN, 0.0f);
    parallel[t].assign(kM * kN, 0.0f);
    GemmBf16(false, t % 2 == 1, kM, kN, kK, a[t].data(), kK, b[t].data(), t % 2 ? kK : kN, false,
             serial[t].data(), kN);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        GemmBf16(false, t % 2 == 1, kM, kN, kK, a[t].data(), kK, b[t].data(), t % 2 ? kK : kN,
                 false, parallel[t].data(), kN);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(parallel[t], serial[t]) << "thread " << t;
}

}  // namespace
}  // namespace reel::layers
