// Tests of the gemm implementation's pieces: the packed layout and the fused gate kernels (against
// a double-precision reference, also far out in the saturated range). The whole LSTM is checked
// through the models in bilstm_test.cc and against PyTorch in bilstm_torch_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "lstm_gates.h"
#include "packed_layout.h"
#include "reel/layers/testing.h"

namespace reel::bilstm {
namespace {

TEST(PackedLayoutTest, SortsByLengthAndKeepsOnlyRunningSequences) {
  const std::vector<int32_t> lengths = {2, 4, 1, 4};
  PackedLayout layout(lengths);
  EXPECT_EQ(layout.batch(), 4);
  EXPECT_EQ(layout.steps(), 4);
  EXPECT_EQ(layout.rows(), 11);
  const std::vector<int64_t> sizes = {4, 3, 2, 2}, offsets = {0, 4, 7, 9};
  for (int64_t t = 0; t < 4; ++t) {
    EXPECT_EQ(layout.batch_size(t), sizes[t]) << t;
    EXPECT_EQ(layout.offset(t), offsets[t]) << t;
  }
  // Longest first, ties in batch order: videos 1, 3, 0, 2.
  EXPECT_EQ(layout.Row(0, 1), 0);
  EXPECT_EQ(layout.Row(0, 3), 1);
  EXPECT_EQ(layout.Row(1, 0), 6);
  EXPECT_EQ(layout.Row(0, 2), 3);
  EXPECT_EQ(layout.Row(3, 3), 10);
}

TEST(PackedLayoutTest, PacksEveryFrameAtItsRowAndCountsFramesInBothTimeOrders) {
  const std::vector<int32_t> lengths = {3, 1, 2};
  const int64_t t_in = 4, dim = 2;
  PackedLayout layout(lengths);
  std::vector<float> btd(3 * t_in * dim);
  std::iota(btd.begin(), btd.end(), 1.0f);
  std::vector<float> packed(layout.rows() * dim);
  layout.Pack(btd.data(), t_in, dim, packed.data());
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t)
      for (int64_t j = 0; j < dim; ++j)
        EXPECT_EQ(packed[layout.Row(t, b) * dim + j], btd[(b * t_in + t) * dim + j]);
  // A backward pass's frame 0 is each video's last.
  const layers::FrameRow forward = layout.Frames(false), backward = layout.Frames(true);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t) {
      EXPECT_EQ(forward(t, b), layout.Row(t, b));
      EXPECT_EQ(backward(t, b), layout.Row(lengths[b] - 1 - t, b));
    }
}

double Sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Pre-activations from -200 to 200 (far into saturation) and random ones; two rows, the second
// without previous state.
TEST(LstmGatesTest, ForwardMatchesDoublePrecisionAndStaysFinite) {
  const int64_t hn = 37, rows = 2;  // not a multiple of any vector width
  std::vector<float> gates = layers::testing::RandomVector(rows * 4 * hn, 3);
  for (int64_t k = 0; k < 4 * hn; ++k) gates[k] = -200.0f + 400.0f * k / (4 * hn - 1);
  for (float& g : gates) g *= 3.0f;
  const std::vector<float> pre = gates;
  const std::vector<float> bias = layers::testing::RandomVector(4 * hn, 4);
  const std::vector<float> c_prev = layers::testing::RandomVector(hn, 5);
  std::vector<float> c(rows * hn), tanh_c(rows * hn), h(rows * 2 * hn, 7.0f);
  GatesStep s;
  s.rows = rows, s.n_prev = 1, s.hidden = hn, s.gates = gates.data(), s.bias = bias.data();
  s.c_prev = c_prev.data(), s.c = c.data(), s.tanh_c = tanh_c.data(), s.h = h.data();
  s.h_ld = 2 * hn;
  LstmGatesForward(s);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < hn; ++j) {
      const float* a = pre.data() + r * 4 * hn;
      const double i = Sig(a[j] + bias[j]), f = Sig(a[hn + j] + bias[hn + j]);
      const double z = std::tanh(a[2 * hn + j] + bias[2 * hn + j]);
      const double o = Sig(a[3 * hn + j] + bias[3 * hn + j]);
      const double cj = f * (r == 0 ? c_prev[j] : 0.0) + i * z, hj = o * std::tanh(cj);
      ASSERT_TRUE(std::isfinite(h[r * 2 * hn + j])) << r << "," << j;
      EXPECT_NEAR(c[r * hn + j], cj, 1e-6 + 1e-6 * std::abs(cj)) << r << "," << j;
      EXPECT_NEAR(h[r * 2 * hn + j], hj, 1e-6) << r << "," << j;
      EXPECT_EQ(h[r * 2 * hn + hn + j], 7.0f);  // past column H: untouched
    }
  const std::string isa = LstmGatesIsa();
  EXPECT_TRUE(isa == "avx512" || isa == "avx2" || isa == "baseline") << isa;
}

}  // namespace
}  // namespace reel::bilstm
