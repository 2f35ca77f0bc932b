// The compressed ring allreduce (compressed_ring.h) on inproc ranks: within 16-bit rounding of the
// fp32 ring on 1-4 ranks for empty, tiny, uneven and multi-chunk counts, every rank ending with the
// same bits; fp16's scale with values past 65504 and near 1e-6; NaN and infinity kept; half the
// bytes of the fp32 ring on the wire; error feedback's residual accounting for every rounding; a
// lost peer failing the call and every later one.
#include "comm/compressed_ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/testing/transport_conformance.h"
#include "train/tiny_run.h"

namespace reel::core {
namespace {

using conformance::Communicators;
using conformance::RunOnRanks;
using ::testing::HasSubstr;

const char* FormatName(WireFormat f) { return f == WireFormat::kBf16 ? "bf16" : "fp16"; }
// Half a unit in the last place, relative: what one rounding may lose.
float HalfUlp(WireFormat f) { return f == WireFormat::kBf16 ? 0x1p-9f : 0x1p-12f; }

std::vector<float> RingInput(int rank, size_t n) {
  std::mt19937 gen(static_cast<uint32_t>(1000 * rank + n));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen) * (1.0f + static_cast<float>(rank));
  return v;
}

// Every rank's `data` summed by the compressed ring (each rank's result).
std::vector<std::vector<float>> CompressedSums(int n, WireFormat f,
                                               std::vector<std::vector<float>> data,
                                               ring::Part part = ring::Part::kAllReduce) {
  Communicators comms = testing::InprocRingGroup(n);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) {
    CompressedRing ring(f, kCompressedRingTag);
    return ring.Run(c, data[static_cast<size_t>(c.rank())], part, NoDeadline());
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  return data;
}

TEST(CompressedRing, MatchesTheFp32RingWithin16BitRoundingAndRanksAgreeBitForBit) {
  for (int n : {1, 2, 3, 4}) {
    // Empty, one value, fewer values than ranks, uneven, several chunks per segment.
    for (size_t count :
         {size_t{0}, size_t{1}, static_cast<size_t>(n - 1), size_t{1003}, size_t{4 * 65536 + 77}}) {
      std::vector<std::vector<float>> in;
      for (int r = 0; r < n; ++r) in.push_back(RingInput(r, count));
      // The fp32 ring's sums, and each element's sum of magnitudes (what roundings scale with).
      std::vector<std::vector<float>> fp32 = in;
      Communicators comms = testing::InprocRingGroup(n);
      std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) {
        return c.AllReduce(fp32[static_cast<size_t>(c.rank())], ReduceOp::kSum, NoDeadline());
      });
      for (const Status& s : st) ASSERT_TRUE(s.ok()) << s;
      std::vector<float> magnitude(count, 0.0f);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) magnitude[i] += std::fabs(in[r][i]);
      for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
        SCOPED_TRACE(std::string(FormatName(f)) + ", " + std::to_string(n) + " ranks, count " +
                     std::to_string(count));
        std::vector<std::vector<float>> out = CompressedSums(n, f, in);
        for (int r = 0; r < n; ++r)
          ASSERT_TRUE(count == 0 ||  // an empty vector's data() may be null: no memcmp
                      std::memcmp(out[r].data(), out[0].data(), count * sizeof(float)) == 0)
              << "rank " << r << " differs from rank 0";
        // A value is rounded at most once per hop and once more in the all-gather.
        const float tolerance = static_cast<float>(n + 1) * HalfUlp(f) * 2;
        for (size_t i = 0; i < count; ++i)
          ASSERT_NEAR(out[0][i], fp32[0][i], tolerance * magnitude[i] + 1e-30f) << "at " << i;
        if (n > 1 && count == 1003) {
          size_t changed = 0;  // the wire rounds: the test could fail
          for (size_t i = 0; i < count; ++i) changed += out[0][i] != fp32[0][i];
          EXPECT_GT(changed, count / 2);
        }
      }
    }
  }
}

// Past 65504 and near 1e-6, fp16 neither overflows nor flushes: each message's scale moves its
// chunk into range.
TEST(CompressedRing, Fp16SumsNearOneE5AndOneEMinus6StayFiniteAndPrecise) {
  for (const float magnitude : {1e5f, 1e-6f}) {
    const int n = 3;
    std::vector<std::vector<float>> in(n, std::vector<float>(500));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < 500; ++i)
        in[r][i] = magnitude * (1.0f + 0.001f * static_cast<float>(i) + 0.1f * r);
    std::vector<std::vector<float>> out = CompressedSums(n, WireFormat::kFp16, in);
    for (size_t i = 0; i < 500; ++i) {
      const double want = double{in[0][i]} + in[1][i] + in[2][i];
      ASSERT_TRUE(std::isfinite(out[1][i]));
      ASSERT_NEAR(out[1][i], want, want * 4 * 0x1p-11) << magnitude << " at " << i;
    }
  }
}

TEST(CompressedRing, NanAndInfinityStayNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    const int n = 3;
    std::vector<std::vector<float>> in(n, std::vector<float>(40, 0.25f));
    in[1][5] = std::numeric_limits<float>::quiet_NaN();
    in[2][17] = inf;
    in[0][30] = -inf;
    std::vector<std::vector<float>> out = CompressedSums(n, f, in);
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(std::isnan(out[r][5])) << FormatName(f) << " rank " << r;
      EXPECT_EQ(out[r][17], inf);
      EXPECT_EQ(out[r][30], -inf);
      EXPECT_EQ(out[r][0], 0.75f);  // the others are untouched by their neighbours
    }
  }
}

// Counts the payload bytes every Send carries.
class ByteCountingCommunicator final : public Communicator {
 public:
  ByteCountingCommunicator(std::unique_ptr<Communicator> inner, std::atomic<size_t>* bytes)
      : inner_(std::move(inner)), bytes_(bytes) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status Send(int d, int t, std::span<const std::byte> b, Deadline dl) override {
    *bytes_ += b.size();
    return inner_->Send(d, t, b, dl);
  }
  Result<Message> Recv(int s, int t, Deadline dl) override { return inner_->Recv(s, t, dl); }
  Status RecvInto(int s, int t, std::span<std::byte> out, Deadline dl) override {
    return inner_->RecvInto(s, t, out, dl);
  }

 private:
  std::unique_ptr<Communicator> inner_;
  std::atomic<size_t>* bytes_;
};

TEST(CompressedRing, HalvesTheBytesOnTheWire) {
  const int n = 3;
  const size_t count = 200000;
  std::atomic<size_t> fp32_bytes{0}, bf16_bytes{0};
  for (bool compressed : {false, true}) {
    auto raw = CreateInprocGroup(n);
    ASSERT_TRUE(raw.ok());
    Communicators comms;
    for (auto& c : *raw) {
      std::unique_ptr<Communicator> counted = std::make_unique<ByteCountingCommunicator>(
          std::move(c), compressed ? &bf16_bytes : &fp32_bytes);
      // The compressed ring needs point-to-point only; the fp32 one is the host's collective.
      if (!compressed) counted = WithRingCollectives(std::move(counted));
      comms.push_back(std::move(counted));
    }
    std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) {
      std::vector<float> data = RingInput(c.rank(), count);
      if (!compressed) return c.AllReduce(data, ReduceOp::kSum, NoDeadline());
      CompressedRing ring(WireFormat::kBf16, kCompressedRingTag);
      return ring.Run(c, data, ring::Part::kAllReduce, NoDeadline());
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s;
  }
  // Each rank sends 2 (n - 1) / n of the data; the fp32 ring also agrees on the arguments first.
  const size_t payload = 2 * (n - 1) * count;  // values sent, over all ranks
  EXPECT_GE(fp32_bytes.load(), payload * sizeof(float));
  EXPECT_GE(bf16_bytes.load(), payload * sizeof(uint16_t));
  EXPECT_LE(bf16_bytes.load(), payload * sizeof(uint16_t) + 64 * kWireHeaderBytes * n);
  EXPECT_LE(2 * bf16_bytes.load(), fp32_bytes.load() + 64 * kWireHeaderBytes * n);
}

// With a residual, each rank records what its roundings took away: the ranks' results plus all
// their residuals give the exact sum (up to fp32's own rounding), also when only the
// reduce-scatter runs (each rank's own shard is then the fp32 sum).
TEST(CompressedRing, TheResidualsHoldEveryRoundingError) {
  for (ring::Part part : {ring::Part::kAllReduce, ring::Part::kReduceScatter}) {
    for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
      const int n = 3;
      const size_t count = 5000;
      std::vector<std::vector<float>> data, residual(n, std::vector<float>(count, 0.0f));
      for (int r = 0; r < n; ++r) data.push_back(RingInput(r, count));
      const std::vector<std::vector<float>> in = data;
      Communicators comms = testing::InprocRingGroup(n);
      std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) {
        const size_t r = static_cast<size_t>(c.rank());
        CompressedRing ring(f, kCompressedRingTag);
        return ring.Run(c, data[r], part, NoDeadline(), residual[r]);
      });
      for (const Status& s : st) ASSERT_TRUE(s.ok()) << s;
      for (int r = 0; r < n; ++r) {
        const ShardRange own = ShardOf(count, n, static_cast<size_t>(r));
        for (size_t i = 0; i < count; ++i) {
          if (part == ring::Part::kReduceScatter &&
              (i < own.offset || i >= own.offset + own.length))
            continue;
          double want = 0, lost = 0, magnitude = 0;
          for (int k = 0; k < n; ++k) {
            want += in[k][i];
            lost += residual[k][i];
            magnitude += std::fabs(in[k][i]);
          }
          ASSERT_NEAR(data[r][i] + lost, want, magnitude * 1e-6) << "rank " << r << " at " << i;
        }
      }
    }
  }
}

TEST(CompressedRing, ALostPeerFailsTheCallAndEveryLaterOne) {
  Communicators comms = testing::InprocRingGroup(2);
  CompressedRing ring(WireFormat::kBf16, kCompressedRingTag);
  std::vector<float> data(100, 1.0f);
  // Rank 1 never takes part.
  Status s =
      ring.Run(*comms[0], data, ring::Part::kAllReduce, DeadlineIn(std::chrono::milliseconds(100)));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("from rank 1"));
  Status later = ring.Run(*comms[0], data, ring::Part::kAllReduce, NoDeadline());
  EXPECT_EQ(later.code(), StatusCode::kFailedPrecondition) << later;
  EXPECT_THAT(later.message(), HasSubstr("unusable since an exchange failed"));
}

}  // namespace
}  // namespace reel::core
