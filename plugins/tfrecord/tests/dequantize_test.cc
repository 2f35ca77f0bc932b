// Streaming stores and the fused dequantize + CRC pass give exactly what the plain paths give, at
// every alignment, span layout and size (including tails shorter than one vector).
#include "dequantize.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "reel/recordio.h"
#include "reel/tensor.h"

namespace reel::tfrecord {
namespace {

TEST(DequantizeTest, StreamingStoresEqualCachedOnesAtEveryAlignment) {
  std::vector<uint8_t> q(4096 + 77);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(i * 29 + 3);
  Tensor cached = Tensor::Uninitialized({static_cast<int64_t>(q.size() + 16)});
  Tensor streamed = Tensor::Uninitialized({static_cast<int64_t>(q.size() + 16)});
  for (size_t shift : {0, 1, 5, 8, 13}) {
    for (size_t n : {size_t{0}, size_t{7}, size_t{32}, size_t{100}, q.size() - shift}) {
      std::fill(cached.values().begin(), cached.values().end(), -9.0f);
      std::fill(streamed.values().begin(), streamed.values().end(), -9.0f);
      DequantizeBytes(q.data() + shift, n, cached.data() + shift, StoreMode::kCached);
      DequantizeBytes(q.data() + shift, n, streamed.data() + shift, StoreMode::kStreaming);
      StoreFence();
      for (size_t i = 0; i < cached.values().size(); ++i)
        ASSERT_EQ(cached.data()[i], streamed.data()[i]) << "shift " << shift << " n " << n;
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(streamed.data()[shift + i], Dequantize(q[shift + i]));
      EXPECT_EQ(streamed.data()[shift + n], -9.0f);  // nothing written past the end
    }
  }
}

TEST(DequantizeTest, FillZeroWritesExactlyTheRange) {
  Tensor t = Tensor::Uninitialized({300});
  for (StoreMode mode : {StoreMode::kCached, StoreMode::kStreaming})
    for (size_t shift : {0, 3, 8})
      for (size_t n : {0, 1, 9, 64, 250}) {
        std::fill(t.values().begin(), t.values().end(), 5.0f);
        FillZero(t.data() + shift, n, mode);
        StoreFence();
        for (size_t i = 0; i < 300; ++i)
          ASSERT_EQ(t.data()[i], i >= shift && i < shift + n ? 0.0f : 5.0f) << i;
      }
}

TEST(DequantizeTest, FusedCrcEqualsCrcAndDequantizationSeparately) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::string payload(std::uniform_int_distribution<size_t>(0, 3000)(rng), '\0');
    for (char& c : payload) c = static_cast<char>(rng());
    // Random non-overlapping spans in ascending order, of random (often frame-like) sizes.
    std::vector<FrameSpan> spans;
    size_t floats = 0;
    const auto* base = reinterpret_cast<const uint8_t*>(payload.data());
    for (size_t at = std::uniform_int_distribution<size_t>(0, 40)(rng); at < payload.size();) {
      size_t n =
          std::min(payload.size() - at,
                   trial % 2 ? size_t{128} : std::uniform_int_distribution<size_t>(0, 300)(rng));
      spans.push_back({base + at, n, nullptr});
      floats += n + 8;
      at += n + std::uniform_int_distribution<size_t>(0, 20)(rng);
    }
    Tensor want = Tensor({static_cast<int64_t>(floats + 8)}, -1.0f);
    Tensor got = Tensor({static_cast<int64_t>(floats + 8)}, -1.0f);
    const size_t skew = trial % 4;  // destinations at every float alignment
    size_t o = skew;
    std::vector<FrameSpan> want_spans = spans;
    for (size_t k = 0; k < spans.size(); ++k) {
      want_spans[k].dst = want.data() + o;
      spans[k].dst = got.data() + o;
      o += spans[k].n + (trial % 3 == 0 ? 0 : 8);
    }
    for (const FrameSpan& s : want_spans) DequantizeBytes(s.src, s.n, s.dst);
    const StoreMode mode = trial % 2 ? StoreMode::kStreaming : StoreMode::kCached;
    uint32_t crc = DequantizeWithCrc(payload, spans, mode);
    StoreFence();
    ASSERT_EQ(crc, recordio::Crc32c(payload)) << "trial " << trial;
    for (size_t i = 0; i < want.values().size(); ++i)
      ASSERT_EQ(got.data()[i], want.data()[i]) << "trial " << trial << " float " << i;
  }
}

}  // namespace
}  // namespace reel::tfrecord
