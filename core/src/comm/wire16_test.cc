// The 16-bit gradient wire (wire16.h): fp16's rounding against hand-checked bits, every fp16 value
// back to itself, the vector paths equal to the scalar references at every tail length, fp16's
// scale keeping large and tiny chunks in range, and non-finite values kept.
#include "comm/wire16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reel/bf16.h"

namespace reel::core {
namespace {

constexpr float kWireInf = std::numeric_limits<float>::infinity();

TEST(Wire16, Fp16RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(ToFp16(1.0f), 0x3c00);
  EXPECT_EQ(ToFp16(-2.0f), 0xc000);
  EXPECT_EQ(ToFp16(65504.0f), 0x7bff);               // the largest
  EXPECT_EQ(ToFp16(65519.0f), 0x7bff);               // below the midpoint to infinity
  EXPECT_EQ(ToFp16(65520.0f), 0x7c00);               // the midpoint: to even, infinity
  EXPECT_EQ(ToFp16(1.0f + 1.0f / 2048), 0x3c00);     // halfway: to even
  EXPECT_EQ(ToFp16(1.0f + 3.0f / 2048), 0x3c02);     // halfway: to even, up
  EXPECT_EQ(ToFp16(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(ToFp16(std::ldexp(1.0f, -25)), 0x0000);  // half of it: to even, zero
  EXPECT_EQ(ToFp16(std::ldexp(3.0f, -26)), 0x0001);  // three quarters: up
  EXPECT_EQ(ToFp16(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(ToFp16(kWireInf), 0x7c00);
  EXPECT_EQ(ToFp16(-kWireInf), 0xfc00);
  EXPECT_TRUE(std::isnan(FromFp16(ToFp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(
      FromFp16(ToFp16(std::bit_cast<float>(0x7f800001u)))));  // a NaN with a tiny payload
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) continue;  // NaNs
    ASSERT_EQ(ToFp16(FromFp16(static_cast<uint16_t>(h))), static_cast<uint16_t>(h))
        << std::hex << h;
  }
}

std::vector<float> WireRandom(size_t n, uint32_t seed, float magnitude) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, magnitude);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

TEST(Wire16, EncodingEqualsTheScalarReferenceAtEveryTail) {
  for (size_t n = 0; n <= 40; ++n) {
    std::vector<float> x = WireRandom(n, static_cast<uint32_t>(n), 3.0f);
    if (n > 3) x[3] = std::numeric_limits<float>::denorm_min();
    std::vector<std::byte> wire(EncodedBytes(n));
    EncodeChunk(WireFormat::kBf16, x, wire);
    const uint16_t* v = reinterpret_cast<const uint16_t*>(wire.data() + kWireHeaderBytes);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], ToBf16(x[i])) << "bf16, n " << n << " i " << i;
    std::vector<float> back(n, 1.0f);
    DecodeChunk(WireFormat::kBf16, wire, back, /*add=*/true);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 1.0f + FromBf16(ToBf16(x[i])));

    EncodeChunk(WireFormat::kFp16, x, wire);
    float scale;
    std::memcpy(&scale, wire.data(), sizeof scale);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(v[i], ToFp16(x[i] / scale)) << "fp16, n " << n << " i " << i;
    DecodeChunk(WireFormat::kFp16, wire, back, /*add=*/false);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], FromFp16(ToFp16(x[i] / scale)) * scale);
  }
}

// Chunks near 1e5 (past fp16's 65504) and near 1e-6 (fp16's subnormals, 4 bits or fewer,
// unscaled) both keep fp16's 11 significant bits.
TEST(Wire16, Fp16ScaleKeepsLargeAndTinyChunksInRange) {
  for (const float magnitude : {1e5f, 1e30f, 1e-6f, 1e-30f}) {
    std::vector<float> x = WireRandom(1000, 7, magnitude), y = x;
    x[0] = magnitude * 4;  // the chunk's largest
    y[0] = x[0];
    RoundThroughWire(WireFormat::kFp16, y);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << magnitude << " at " << i;
      // Values within 2^-12 of the largest keep 11 bits; smaller ones keep at least that.
      ASSERT_LE(std::fabs(y[i] - x[i]), std::max(std::fabs(x[i]), x[0] * 0x1p-12f) * 0x1p-11f)
          << magnitude << " at " << i << ": " << x[i] << " became " << y[i];
    }
  }
}

TEST(Wire16, NonFiniteValuesStayNonFinite) {
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    std::vector<float> x = {
        1.5f, std::numeric_limits<float>::quiet_NaN(), kWireInf, -kWireInf, 1e5f, 3e38f};
    RoundThroughWire(f, x);
    EXPECT_TRUE(std::isnan(x[1]));
    EXPECT_EQ(x[2], kWireInf);
    EXPECT_EQ(x[3], -kWireInf);
    EXPECT_TRUE(std::isfinite(x[0]) && std::isfinite(x[4]) && std::isfinite(x[5]));
  }
}

}  // namespace
}  // namespace reel::core
