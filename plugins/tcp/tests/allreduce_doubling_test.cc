// AllReduce by recursive doubling (src/allreduce_doubling.cc, option allreduce_doubling_bytes):
// the conformance suite's collectives on 1 to 5 ranks with every AllReduce doubling; results
// that are the doubling tree's, bit for bit, on every rank, and within float reassociation of the
// exact sum (so of the ring's); the threshold's edges; ranks that disagree about the size; the
// option's range. A rank killed mid-call: process_fault_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reel/testing/transport_conformance.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing::doubling_test {
namespace {

using ::reel::conformance::CollectiveConformance;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Doubling for every AllReduce up to `bytes`, none sent with the agreement, over TCP (ranks as
// threads share a host, whose memory would reduce them otherwise).
TcpOptions DoublingUpTo(size_t bytes) {
  TcpOptions o = TestOptions();
  o.allreduce_layout = TcpOptions::Layout::kFlat;
  o.allreduce_small_bytes = 0;
  o.allreduce_doubling_bytes = bytes;
  return o;
}

conformance::TransportUnderTest AlwaysDoubling() {
  return conformance::RanksAsThreads("tcp_doubling", []() -> Result<conformance::Group> {
    return conformance::Group{MakeTcpTransport(DoublingUpTo(size_t{1} << 30)), FreeCoordinator()};
  });
}

// The collectives of the conformance suite on 1 to 5 ranks (5: the folding of 3 and 5 ranks is
// the non-power-of-two case beside 3), every AllReduce by doubling, the large count too.
INSTANTIATE_TEST_SUITE_P(TcpDoubling, CollectiveConformance,
                         ::testing::Combine(::testing::Values(AlwaysDoubling()),
                                            ::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::ValuesIn(conformance::AllCounts())),
                         conformance::CollectiveCaseName);

// Rank r's data: floats of mixed signs and magnitudes, so that sums depend on their order.
std::vector<float> Data(int rank, size_t count) {
  std::mt19937 gen(static_cast<uint32_t>(1000 * rank + count));
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<float> d(count);
  for (float& v : d) v = std::ldexp(mantissa(gen), exponent(gen));
  return d;
}

float Apply(float a, float b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kMin:
      return std::min(a, b);
  }
  return 0;
}

// What recursive doubling computes (MPICH's folding of the first 2*rem ranks, then the tree with
// the lower place on the left), written out independently of the transport.
std::vector<float> DoublingTree(const std::vector<std::vector<float>>& all, ReduceOp op) {
  const size_t n = all.size();
  size_t p = 1;
  while (p * 2 <= n) p *= 2;
  const size_t rem = n - p;
  std::vector<std::vector<float>> place(p);
  for (size_t i = 0; i < p; ++i) {
    if (i < rem) {
      place[i] = all[2 * i];
      for (size_t k = 0; k < place[i].size(); ++k)
        place[i][k] = Apply(all[2 * i][k], all[2 * i + 1][k], op);
    } else {
      place[i] = all[i + rem];
    }
  }
  for (size_t mask = 1; mask < p; mask <<= 1)
    for (size_t i = 0; i < p; ++i)
      if ((i & mask) == 0) {
        for (size_t k = 0; k < place[i].size(); ++k)
          place[i][k] = Apply(place[i][k], place[i | mask][k], op);
        place[i | mask] = place[i];
      }
  return place[0];
}

// Every rank's AllReduce of Data(rank, count): their results by rank, or the first failure.
Result<std::vector<std::vector<float>>> ReduceOnRanks(conformance::Communicators& comms,
                                                      size_t count, ReduceOp op) {
  std::vector<std::vector<float>> results(comms.size());
  std::vector<Status> st = conformance::RunOnRanks(comms, [&](Communicator& c) -> Status {
    std::vector<float> d = Data(c.rank(), count);
    REEL_RETURN_IF_ERROR(c.AllReduce(d, op, DeadlineIn(60s)));
    results[static_cast<size_t>(c.rank())] = std::move(d);
    return Status::Ok();
  });
  for (size_t r = 0; r < st.size(); ++r)
    if (!st[r].ok()) return st[r].WithContext("rank " + std::to_string(r));
  return results;
}

// The sum against the exact one (in double): any order of n terms is within
// (n-1) * 2^-24 * sum |x| of it, so two orders (doubling's and the ring's) within twice that.
void ExpectWithinReassociation(const std::vector<float>& got, int n, size_t count) {
  for (size_t k = 0; k < count; ++k) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < n; ++r) {
      const double x = Data(r, count)[k];
      exact += x;
      magnitude += std::abs(x);
    }
    ASSERT_LE(std::abs(got[k] - exact), (n - 1) * std::ldexp(magnitude, -24))
        << "index " << k << " of " << count << ", " << n << " ranks";
  }
}

// Every rank holds the doubling tree's result bit for bit (not the ring's: these sums depend on
// their order), for 2 to 5 ranks and each operation.
TEST(TcpDoubling, EveryRankHoldsTheDoublingTreesBits) {
  for (int n : {2, 3, 4, 5}) {
    conformance::Communicators comms = Group(n, DoublingUpTo(size_t{1} << 20));
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      for (size_t count : {size_t{1}, size_t{7}, size_t{1000}}) {
        Result<std::vector<std::vector<float>>> got = ReduceOnRanks(comms, count, op);
        ASSERT_TRUE(got.ok()) << got.status();
        std::vector<std::vector<float>> all;
        for (int r = 0; r < n; ++r) all.push_back(Data(r, count));
        const std::vector<float> want = DoublingTree(all, op);
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(std::memcmp((*got)[r].data(), want.data(), count * sizeof(float)), 0)
              << n << " ranks, rank " << r << ", " << count << " floats, op "
              << static_cast<int>(op);
        if (op == ReduceOp::kSum) ExpectWithinReassociation((*got)[0], n, count);
      }
    }
  }
}

// At the threshold (4 KiB: 1024 floats) and one float below, doubling; one float above, the
// ring: both sum right and every rank holds the same bits.
TEST(TcpDoubling, SizesAroundTheThresholdSumRightOnBothSides) {
  for (int n : {3, 4}) {
    conformance::Communicators comms = Group(n, DoublingUpTo(4096));
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    for (size_t count : {size_t{1023}, size_t{1024}, size_t{1025}}) {
      Result<std::vector<std::vector<float>>> got = ReduceOnRanks(comms, count, ReduceOp::kSum);
      ASSERT_TRUE(got.ok()) << got.status();
      for (int r = 1; r < n; ++r)
        EXPECT_EQ(std::memcmp((*got)[r].data(), (*got)[0].data(), count * sizeof(float)), 0)
            << n << " ranks, rank " << r << ", " << count << " floats";
      ExpectWithinReassociation((*got)[0], n, count);
      if (count <= 1024) {
        std::vector<std::vector<float>> all;
        for (int r = 0; r < n; ++r) all.push_back(Data(r, count));
        EXPECT_EQ((*got)[0], DoublingTree(all, ReduceOp::kSum)) << n << " ranks, " << count;
      }
    }
  }
}

// Ranks that disagree about the size, both below the threshold or on either side of it, all fail
// with InvalidArgument naming the sizes, their data untouched; the next call sums right.
TEST(TcpDoubling, RanksThatDisagreeAboutTheSizeAllFailAndStayInStep) {
  for (int n : {2, 3, 5}) {
    conformance::Communicators comms = Group(n, DoublingUpTo(4096));
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    for (size_t other : {size_t{12}, size_t{5000}}) {
      std::vector<Status> st = conformance::RunOnRanks(comms, [&](Communicator& c) -> Status {
        std::vector<float> d = Data(c.rank(), c.rank() == n - 1 ? other : 10);
        const std::vector<float> before = d;
        Status s = c.AllReduce(d, ReduceOp::kSum, DeadlineIn(60s));
        if (s.code() != StatusCode::kInvalidArgument)
          return InternalError("expected InvalidArgument, got " + s.ToString());
        if (s.message().find("same size") == std::string::npos)
          return InternalError("the error does not say why: " + s.ToString());
        if (d != before) return InternalError("the refused call changed the data");
        return Status::Ok();
      });
      for (int r = 0; r < n; ++r)
        EXPECT_TRUE(st[r].ok()) << n << " ranks, rank " << r << ", 10 against " << other << ": "
                                << st[r];
      Result<std::vector<std::vector<float>>> got = ReduceOnRanks(comms, 100, ReduceOp::kSum);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectWithinReassociation((*got)[0], n, 100);
    }
  }
}

// A tcp transport whose rank r runs on host hosts[r] (option host_id).
class DoublingHostsTransport final : public Transport {
 public:
  DoublingHostsTransport(TcpOptions options, std::string hosts)
      : options_(std::move(options)), hosts_(std::move(hosts)) {}
  Result<std::unique_ptr<Communicator>> Connect(const TransportContext& ctx,
                                                Deadline deadline) override {
    TcpOptions o = options_;
    o.host_id = std::string(1, hosts_[static_cast<size_t>(ctx.rank)]);
    return MakeTcpTransport(o)->Connect(ctx, deadline);
  }

 private:
  const TcpOptions options_;
  const std::string hosts_;
};

// Hierarchical layouts: the hosts' leaders double across hosts (2, 3 and 4 of them, uneven
// hosts too); every rank holds the same bits, within reassociation of the exact sum.
TEST(TcpDoubling, TheLeadersDoubleAcrossHosts) {
  TcpOptions options = DoublingUpTo(size_t{1} << 20);
  options.allreduce_layout = TcpOptions::Layout::kHierarchical;
  for (const std::string hosts : {"aabb", "aabbc", "abbcd"}) {
    DoublingHostsTransport transport(options, hosts);
    auto comms = conformance::ConnectOnThreads(transport, static_cast<int>(hosts.size()),
                                               FreeCoordinator(), DeadlineIn(60s));
    ASSERT_TRUE(comms.ok()) << comms.status();
    const int n = static_cast<int>(hosts.size());
    for (size_t count : {size_t{1}, size_t{1000}}) {
      Result<std::vector<std::vector<float>>> got = ReduceOnRanks(*comms, count, ReduceOp::kSum);
      ASSERT_TRUE(got.ok()) << hosts << ": " << got.status();
      for (int r = 1; r < n; ++r)
        EXPECT_EQ(std::memcmp((*got)[r].data(), (*got)[0].data(), count * sizeof(float)), 0)
            << hosts << ", rank " << r << ", " << count << " floats";
      ExpectWithinReassociation((*got)[0], n, count);
    }
  }
}

// Messages far over the receive budget (16 MiB against 4 KiB): partners that sent to each other
// at once would each stop staging the other's partway and wait in their sends until the deadline;
// they go one way after the other instead, and the sum is right (whole numbers: exact).
TEST(TcpDoubling, MessagesOverTheReceiveBudgetStillExchange) {
  TcpOptions options = DoublingUpTo(size_t{1} << 30);
  options.receive_budget_bytes = TcpOptions::kMinReceiveBudgetBytes;
  for (int n : {2, 3, 4}) {
    conformance::Communicators comms = Group(n, options);
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    std::vector<Status> st = conformance::RunOnRanks(comms, [&](Communicator& c) -> Status {
      std::vector<float> d(size_t{4} << 20, static_cast<float>(c.rank() + 1));
      REEL_RETURN_IF_ERROR(c.AllReduce(d, ReduceOp::kSum, DeadlineIn(60s)));
      const float want = static_cast<float>(n * (n + 1) / 2);
      if (std::any_of(d.begin(), d.end(), [&](float v) { return v != want; }))
        return InternalError("a sum is not " + std::to_string(want));
      return Status::Ok();
    });
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(st[r].ok()) << n << " ranks, rank " << r << ": " << st[r];
  }
}

TEST(TcpDoubling, TheOptionsRangeIsChecked) {
  for (const char* bad : {"-1", "1073741825"}) {
    Result<Options> o = ParseOptions(TcpOptionSchema(), {{"allreduce_doubling_bytes", bad}});
    ASSERT_TRUE(o.ok()) << o.status();
    Result<TcpOptions> t = TcpOptionsFrom(*o);
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(t.status().message(), AllOf(HasSubstr("allreduce_doubling_bytes"), HasSubstr(bad),
                                            HasSubstr("[0, 1073741824]")));
  }
  for (const char* good : {"0", "1073741824"}) {
    Result<Options> o = ParseOptions(TcpOptionSchema(), {{"allreduce_doubling_bytes", good}});
    ASSERT_TRUE(o.ok()) << o.status();
    Result<TcpOptions> t = TcpOptionsFrom(*o);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->allreduce_doubling_bytes, std::stoull(good));
  }
  Result<Options> unset = ParseOptions(TcpOptionSchema(), {});
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(TcpOptionsFrom(*unset)->allreduce_doubling_bytes, TcpOptions::kDefaultDoublingBytes);
}

// Ranks whose thresholds differ would take different paths for one call: the group refuses to
// form, naming the option, both values and both ranks.
TEST(TcpDoubling, RanksWithDifferentThresholdsAreRefused) {
  const std::string mine = AgreedOptions(DoublingUpTo(4096));
  const std::string theirs = AgreedOptions(DoublingUpTo(0));
  EXPECT_THAT(OptionsDisagreement(mine, 0, theirs, 1),
              HasSubstr("tcp option 'allreduce_doubling_bytes' is '0' on rank 1 but '4096' on "
                        "rank 0"));
}

}  // namespace
}  // namespace reel::tcp::testing::doubling_test
