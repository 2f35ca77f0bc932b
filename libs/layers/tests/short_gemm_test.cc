// ShortGemm, ShortGemmAtB and ShortGemmABt against dnnl_sgemm (Gemm) on sizes that leave partial
// tiles in every dimension (rows 1, 3, 32, 33; columns not a multiple of 16; odd depths),
// overwriting and accumulating, on buffers with strides wider than the matrices (whose spare
// columns must stay untouched) and on exactly sized ones (ASan sees any read past them). Sizes
// above ~1 MFLOP take the threaded path. Each test runs the AVX-512 kernels (where the CPU has
// them) and the fallback route.
#include "../src/short_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reel/layers/gemm.h"
#include "reel/layers/init.h"
#include "reel/layers/vector_isa.h"

namespace reel::layers {
namespace {

constexpr float kGuard = 12345.0f;  // the value of every element outside the matrices

std::vector<float> Random(int64_t rows, int64_t cols, int64_t ld, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(rows * ld), kGuard);
  Rng rng(seed);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) v[static_cast<size_t>(i * ld + j)] = rng.Symmetric(1.0f);
  return v;
}

struct Shape {
  int64_t m, n, k;
  int64_t pad;  // extra columns in every leading dimension (0: exactly sized buffers)
};

enum class Op { kAB, kAtB, kABt };

std::string Name(const Shape& s, Op op, bool accumulate, bool bias = false) {
  return std::string(op == Op::kAB    ? "AB"
                     : op == Op::kAtB ? "AtB"
                                      : "ABt") +
         " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
         " pad=" + std::to_string(s.pad) + (accumulate ? " accumulate" : " overwrite") +
         (bias ? " bias" : "");
}

// Runs one product both ways and compares C element by element, to float rounding of a k-term
// dot product of values in [-1, 1] (plus C's initial values when accumulating, plus the bias row
// with `bias`, A B only). For A^T B, also B's column sums.
void Check(const Shape& s, Op op, bool accumulate, bool bias = false) {
  SCOPED_TRACE(Name(s, op, accumulate, bias));
  // A is [m, k] ([k, m] for A^T B); B is [k, n] ([n, k] for A B^T); C is [m, n].
  const bool at = op == Op::kAtB, bt = op == Op::kABt;
  const int64_t a_rows = at ? s.k : s.m, a_cols = at ? s.m : s.k;
  const int64_t b_rows = bt ? s.n : s.k, b_cols = bt ? s.k : s.n;
  const int64_t lda = a_cols + s.pad, ldb = b_cols + s.pad, ldc = s.n + s.pad;
  const std::vector<float> a = Random(a_rows, a_cols, lda, 1);
  const std::vector<float> b = Random(b_rows, b_cols, ldb, 2);
  std::vector<float> c = Random(s.m, s.n, ldc, 3);
  std::vector<float> want = c;
  Gemm(at, bt, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, accumulate ? 1.0f : 0.0f,
       want.data(), ldc);
  const std::vector<float> bias_row = Random(1, s.n, s.n, 4);
  if (bias)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) want[static_cast<size_t>(i * ldc + j)] += bias_row[j];
  std::vector<float> sums(static_cast<size_t>(s.n), kGuard);
  if (op == Op::kAB)
    ShortGemm(s.m, s.n, s.k, a.data(), lda, b.data(), ldb, accumulate, c.data(), ldc,
              bias ? bias_row.data() : nullptr);
  else if (at)
    ShortGemmAtB(s.m, s.n, s.k, a.data(), lda, b.data(), ldb, accumulate, c.data(), ldc,
                 sums.data());
  else
    ShortGemmABt(s.m, s.n, s.k, a.data(), lda, b.data(), ldb, accumulate, c.data(), ldc);
  const float tolerance = 1e-6f * static_cast<float>(s.k + 2);
  int64_t bad = 0;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at_ij = static_cast<size_t>(i * ldc + j);
      const bool inside = j < s.n;
      const bool ok = inside ? std::abs(c[at_ij] - want[at_ij]) <= tolerance : c[at_ij] == kGuard;
      if (!ok && ++bad <= 5)
        ADD_FAILURE() << "C[" << i << "][" << j << "] = " << c[at_ij] << ", want "
                      << (inside ? want[at_ij] : kGuard)
                      << (inside ? "" : " (outside C: untouched)");
    }
  EXPECT_EQ(bad, 0);
  if (!at) return;
  for (int64_t j = 0; j < s.n; ++j) {
    double want_sum = 0;
    for (int64_t p = 0; p < s.k; ++p) want_sum += b[static_cast<size_t>(p * ldb + j)];
    if (std::abs(sums[static_cast<size_t>(j)] - want_sum) > tolerance && ++bad <= 5)
      ADD_FAILURE() << "column sum " << j << " = " << sums[static_cast<size_t>(j)] << ", want "
                    << want_sum;
  }
  EXPECT_EQ(bad, 0);
}

std::vector<Shape> Shapes() {
  std::vector<Shape> shapes;
  for (int64_t m : {1, 3, 32, 33})
    for (int64_t n : {1, 15, 49, 161})
      for (int64_t k : {1, 7, 255})
        for (int64_t pad : {0, 5}) shapes.push_back({m, n, k, pad});
  // The kernels' widest short side, and above the threading threshold with a column count that
  // splits into unequal parts.
  shapes.push_back({64, 97, 31, 1});
  shapes.push_back({33, 3001, 129, 0});
  shapes.push_back({32, 4003, 256, 3});
  return shapes;
}

// The parameter: whether the fallback route is forced.
class ShortGemmTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    RecordProperty("vector_isa", VectorIsaName(DetectVectorIsa()));
    ForceShortGemmFallbackForTesting(GetParam());
  }
  void TearDown() override { ForceShortGemmFallbackForTesting(false); }
};

TEST_P(ShortGemmTest, MatchesSgemmOverwritingAndAccumulating) {
  for (const Shape& s : Shapes())
    for (bool accumulate : {false, true}) Check(s, Op::kAB, accumulate);
}

TEST_P(ShortGemmTest, AddsTheBiasRowAsItStoresC) {
  for (const Shape& s : Shapes())
    for (bool accumulate : {false, true}) Check(s, Op::kAB, accumulate, /*bias=*/true);
}

TEST_P(ShortGemmTest, AtBAndColumnSumsMatchSgemmOverwritingAndAccumulating) {
  for (const Shape& s : Shapes())
    for (bool accumulate : {false, true}) Check(s, Op::kAtB, accumulate);
}

TEST_P(ShortGemmTest, ABtMatchesSgemmOverwritingAndAccumulating) {
  for (const Shape& s : Shapes())
    for (bool accumulate : {false, true}) Check(s, Op::kABt, accumulate);
  // Past the kernel's 64 rows (dnnl_sgemm's plain route).
  for (bool accumulate : {false, true}) Check({65, 50, 33, 2}, Op::kABt, accumulate);
}

// A depth of zero is an empty sum: C becomes 0, or keeps its values when accumulating.
TEST_P(ShortGemmTest, ZeroDepthGivesZerosOrLeavesCAlone) {
  const std::vector<float> a(3), b(20);
  for (Op op : {Op::kAB, Op::kAtB, Op::kABt}) {
    SCOPED_TRACE(Name({3, 20, 0, 0}, op, false));
    std::vector<float> c(3 * 20, 2.0f);
    for (bool accumulate : {true, false}) {
      if (op == Op::kAB)
        ShortGemm(3, 20, 0, a.data(), 1, b.data(), 20, accumulate, c.data(), 20);
      else if (op == Op::kAtB)
        ShortGemmAtB(3, 20, 0, a.data(), 3, b.data(), 20, accumulate, c.data(), 20);
      else
        ShortGemmABt(3, 20, 0, a.data(), 1, b.data(), 1, accumulate, c.data(), 20);
      EXPECT_EQ(c, std::vector<float>(3 * 20, accumulate ? 2.0f : 0.0f));
    }
  }
  // With a bias, an empty sum leaves only the bias (added when accumulating).
  const std::vector<float> bias(20, 0.5f);
  std::vector<float> c(3 * 20, 2.0f);
  ShortGemm(3, 20, 0, a.data(), 1, b.data(), 20, true, c.data(), 20, bias.data());
  EXPECT_EQ(c, std::vector<float>(3 * 20, 2.5f));
  ShortGemm(3, 20, 0, a.data(), 1, b.data(), 20, false, c.data(), 20, bias.data());
  EXPECT_EQ(c, std::vector<float>(3 * 20, 0.5f));
}

// Under AddressSanitizer the AVX-512 tiles run unchecked and each call checks its rows' ends
// instead (short_gemm_avx512.cc): a B one float shorter than its k rows must still be reported.
TEST_P(ShortGemmTest, UnderAddressSanitizerAShortMatrixIsReported) {
#if defined(__SANITIZE_ADDRESS__)
  if (GetParam() || DetectVectorIsa() != VectorIsa::kAvx512 || !short_gemm_avx512::Compiled())
    GTEST_SKIP() << "checks the AVX-512 kernels' own bounds checks";
  const int64_t m = 3, n = 40, k = 5;
  std::vector<float> a(m * k, 1.0f), c(m * n);
  std::vector<float> b(k * n - 1, 1.0f);  // one float short of B [k, n]
  EXPECT_DEATH(ShortGemm(m, n, k, a.data(), k, b.data(), n, false, c.data(), n),
               "heap-buffer-overflow");
  std::vector<float> dy(k * n - 1, 1.0f), dw(m * n);  // A^T B with the same short B
  EXPECT_DEATH(ShortGemmAtB(m, n, k, a.data(), m, dy.data(), n, false, dw.data(), n),
               "heap-buffer-overflow");
  std::vector<float> w(n * k - 1, 1.0f), dx(m * n);  // A B^T with B [n, k] one float short
  EXPECT_DEATH(ShortGemmABt(m, n, k, a.data(), k, w.data(), k, false, dx.data(), n),
               "heap-buffer-overflow");
#else
  GTEST_SKIP() << "needs a build with -fsanitize=address (scripts/test.sh's ASan phase)";
#endif
}

INSTANTIATE_TEST_SUITE_P(Routes, ShortGemmTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Fallback" : "Best";
                         });

}  // namespace
}  // namespace reel::layers
