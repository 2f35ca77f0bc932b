// The tcp transport's native AllReduce (src/allreduce.cc), beyond what the conformance suite
// checks: the calling thread borrows its left neighbour's connection from the io thread, so these
// tests hold it to what the io thread guaranteed — frames of other tags arriving meanwhile reach
// their receivers, heartbeats keep flowing, deadlines and departures end the call — and check
// what the suite skips for native collectives (ranks that disagree about the size).
// A killed or stopped rank mid-allreduce: process_fault_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "reel/testing/transport_conformance.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// rank r holds r + 1 + i at index i; the sum over n ranks is n(n+1)/2 + n i.
std::vector<float> RankData(const Communicator& c, size_t count) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(c.rank() + 1) + float(i % 1000);
  return data;
}
Status CheckSum(const Communicator& c, const std::vector<float>& data) {
  const float n = static_cast<float>(c.size());
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != n * (n + 1) / 2 + n * float(i % 1000))
      return InternalError("index " + std::to_string(i) + " holds " + std::to_string(data[i]));
  return Status::Ok();
}

TEST(TcpAllReduce, IsNativeAndMatchesTheSum) {
  conformance::Communicators comms = Group(3);
  ASSERT_EQ(comms.size(), 3u);
  EXPECT_TRUE(comms[0]->capabilities().native_allreduce);
  // 1 MiB per rank: several chunks per ring step.
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    std::vector<float> data = RankData(c, (size_t{1} << 18) + 7);
    for (int round = 0; round < 3; ++round) {
      std::vector<float> d = data;
      REEL_RETURN_IF_ERROR(c.AllReduce(d, ReduceOp::kSum, DeadlineIn(60s)));
      REEL_RETURN_IF_ERROR(CheckSum(c, d));
    }
    return Status::Ok();
  });
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

// Two ranks: each rank's left and right neighbour is the other, so every user message between
// them arrives on a connection that the allreduce has borrowed from the io thread.
TEST(TcpAllReduce, UserMessagesDuringAnAllReduceReachTheirReceivers) {
  conformance::Communicators comms = Group(2);
  ASSERT_EQ(comms.size(), 2u);
  constexpr int kMessages = 20;
  constexpr int kTag = 7;
  const std::vector<size_t> sizes = {0, 1, 4096, 300 << 10, 3 << 20};
  std::vector<Status> st = conformance::RunOnRanks(comms, [&](Communicator& c) -> Status {
    const int other = 1 - c.rank();
    Status sent, received;
    // A second thread per rank sends to the other rank and receives from it, both ways at once,
    // while the first runs allreduces.
    std::thread sender([&] {
      for (int m = 0; m < kMessages && sent.ok(); ++m)
        sent = c.Send(other, kTag, Pattern(sizes[m % sizes.size()], m), DeadlineIn(60s));
    });
    std::thread receiver([&] {
      for (int m = 0; m < kMessages && received.ok(); ++m) {
        const std::vector<std::byte> want = Pattern(sizes[m % sizes.size()], m);
        if (m % 2 == 0) {  // into the caller's memory
          std::vector<std::byte> got(want.size());
          received = c.RecvInto(other, kTag, got, DeadlineIn(60s));
          if (received.ok() && got != want)
            received = InternalError("message " + std::to_string(m) + " differs");
        } else {
          Result<Message> got = c.Recv(other, kTag, DeadlineIn(60s));
          received = got.status();
          if (received.ok() && got->payload != want)
            received = InternalError("message " + std::to_string(m) + " differs");
        }
      }
    });
    Status reduced;
    for (int round = 0; round < 10 && reduced.ok(); ++round) {
      std::vector<float> data = RankData(c, (size_t{1} << 18) + 3);
      reduced = c.AllReduce(data, ReduceOp::kSum, DeadlineIn(60s));
      if (reduced.ok()) reduced = CheckSum(c, data);
    }
    sender.join();
    receiver.join();
    REEL_RETURN_IF_ERROR(reduced.WithContext("allreduce"));
    REEL_RETURN_IF_ERROR(sent.WithContext("sending"));
    return received.WithContext("receiving");
  });
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

// Also in the conformance suite (collective_argument_tests.cc); here with 2 and 3 ranks: the
// agreement before the ring (reel/collective_agreement.h) tells every rank.
TEST(TcpAllReduce, RanksThatDisagreeAboutTheSizeAllFail) {
  for (int n : {2, 3}) {
    conformance::Communicators comms = Group(n);
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
      std::vector<float> data(10 + 2 * static_cast<size_t>(c.rank()), 1.0f);
      return c.AllReduce(data, ReduceOp::kSum, DeadlineIn(60s));
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(st[r].code(), StatusCode::kInvalidArgument) << n << " ranks, rank " << r;
      EXPECT_THAT(st[r].message(), HasSubstr("same size")) << n << " ranks, rank " << r;
    }
  }
}

// A small AllReduce sends its data with the agreement (allreduce_small_bytes); a larger one
// agrees and then runs the ring. Ranks on both sides of that line still meet in the agreement and
// all fail, data untouched; afterwards small and ring calls alike reduce correctly, and every
// rank holds bit for bit the same result.
TEST(TcpAllReduce, RanksOnBothSidesOfTheSmallPathAllFailThenBothPathsReduce) {
  for (int n : {2, 3}) {
    conformance::Communicators comms = Group(n);
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    std::vector<std::vector<float>> results(static_cast<size_t>(n));
    std::vector<Status> st = conformance::RunOnRanks(comms, [&](Communicator& c) -> Status {
      std::vector<float> data = RankData(c, c.rank() == 0 ? 1000 : 100000);
      const std::vector<float> before = data;
      Status s = c.AllReduce(data, ReduceOp::kSum, DeadlineIn(60s));
      if (s.code() != StatusCode::kInvalidArgument)
        return InternalError("sizes 1000 and 100000: " + s.ToString());
      if (data != before) return InternalError("the refused call changed the data");
      for (size_t count : {size_t{1}, size_t{1000}, size_t{4096}, size_t{100000}}) {
        std::vector<float> d = RankData(c, count);
        for (float& v : d) v *= 0.1f;  // sums that depend on their order
        REEL_RETURN_IF_ERROR(c.AllReduce(d, ReduceOp::kSum, DeadlineIn(60s)));
        if (count == 1000) results[static_cast<size_t>(c.rank())] = d;
        std::vector<float> e = RankData(c, count);
        REEL_RETURN_IF_ERROR(c.AllReduce(e, ReduceOp::kSum, DeadlineIn(60s)));
        REEL_RETURN_IF_ERROR(CheckSum(c, e).WithContext(std::to_string(count) + " floats"));
      }
      return Status::Ok();
    });
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(st[r].ok()) << n << " ranks, rank " << r << ": " << st[r];
    for (int r = 1; r < n; ++r) EXPECT_EQ(results[r], results[0]) << n << " ranks, rank " << r;
  }
}

// After an allreduce refused because the ranks disagree about the size (4 MiB on rank 1: 8
// chunks), nothing of it may reach a later collective: not the core's Broadcast, whose first tag
// is the one native allreduces once shared with it, nor the next allreduce. (The agreement sends
// no chunk before the ranks agree; before it, rank 1's first step was left over at rank 0.)
TEST(TcpAllReduce, ALeftoverOfAFailedAllReduceReachesNoLaterCollective) {
  conformance::Communicators comms = Group(2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    std::vector<float> wrong(c.rank() == 0 ? 10 : size_t{1} << 20, 1.0f);  // 4 MiB: 8 chunks
    if (c.AllReduce(wrong, ReduceOp::kSum, DeadlineIn(60s)).code() != StatusCode::kInvalidArgument)
      return InternalError("the allreduce of different sizes did not fail as it should");
    // Rank 1 broadcasts a 256 KiB chunk, the size of a leftover frame's payload.
    std::vector<float> sent(size_t{1} << 16);
    for (size_t i = 0; i < sent.size(); ++i) sent[i] = c.rank() == 1 ? float(i) : -1.0f;
    REEL_RETURN_IF_ERROR(c.Broadcast(std::as_writable_bytes(std::span(sent)), 1, DeadlineIn(60s))
                             .WithContext("broadcast"));
    for (size_t i = 0; i < sent.size(); ++i)
      if (sent[i] != float(i))
        return InternalError("broadcast index " + std::to_string(i) + " holds " +
                             std::to_string(sent[i]));
    for (size_t count : {size_t{1} << 16, size_t{1} << 20}) {
      std::vector<float> data = RankData(c, count);
      REEL_RETURN_IF_ERROR(
          c.AllReduce(data, ReduceOp::kSum, DeadlineIn(60s)).WithContext("allreduce"));
      REEL_RETURN_IF_ERROR(CheckSum(c, data));
    }
    return Status::Ok();
  });
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

// Two threads' AllReduces on one rank (outside the contract: collectives are called by one thread
// per rank, but a mistake must not hang a caller). Thread A's call waits for rank 1, which
// withholds its part; thread B's, with a deadline of its own, must return DeadlineExceeded at that
// deadline instead of waiting behind A (before: it blocked on the collective's mutex until A
// ended). B took no collective number, so the rank's collectives count as failed after it.
TEST(TcpAllReduce, ASecondThreadsAllReduceEndsAtItsOwnDeadline) {
  conformance::Communicators comms = Group(2);
  ASSERT_EQ(comms.size(), 2u);
  std::atomic<bool> a_ended{false};
  Status a_status;
  std::thread a([&] {
    std::vector<float> data = RankData(*comms[0], 1000);
    a_status = comms[0]->AllReduce(data, ReduceOp::kSum, DeadlineIn(60s));
    a_ended.store(true);
    if (a_status.ok()) a_status = CheckSum(*comms[0], data);
  });
  std::this_thread::sleep_for(200ms);  // A holds the collective, waiting for rank 1
  std::vector<float> b_data(16, 7.0f);
  const auto b_deadline = DeadlineIn(500ms);
  const Status b = comms[0]->AllReduce(b_data, ReduceOp::kSum, b_deadline);
  const auto late = Clock::now() - b_deadline;
  std::cout << "[collective mutex] B returned "
            << std::chrono::duration_cast<std::chrono::milliseconds>(late).count()
            << " ms after its deadline\n";
  EXPECT_EQ(b.code(), StatusCode::kDeadlineExceeded) << b;
  EXPECT_THAT(b.message(), HasSubstr("another thread's AllReduce"));
  EXPECT_FALSE(a_ended.load()) << "B waited for A to end";
  EXPECT_LT(late, 10s) << "B hung past its deadline";  // a bound for hanging, not for speed
  EXPECT_EQ(b_data, std::vector<float>(16, 7.0f)) << "B touched its data";
  // Rank 1 takes part in A's call now: A completes, correct.
  std::vector<float> theirs = RankData(*comms[1], 1000);
  const Status peer = comms[1]->AllReduce(theirs, ReduceOp::kSum, DeadlineIn(60s));
  a.join();
  EXPECT_TRUE(peer.ok()) << peer;
  EXPECT_TRUE(a_status.ok()) << a_status;
  // B's failure stays: the next AllReduce on rank 0 is refused, naming it.
  std::vector<float> next(16, 1.0f);
  const Status after = comms[0]->AllReduce(next, ReduceOp::kSum, DeadlineIn(5s));
  EXPECT_EQ(after.code(), StatusCode::kFailedPrecondition) << after;
  EXPECT_THAT(after.message(), HasSubstr("another thread's AllReduce"));
}

// Rank 2 stays away: ranks 0 and 1 wait for it until their deadline (in the agreement before the
// ring). Afterwards the connections work for point-to-point as before.
// With and without busy waiting (allreduce_spin_us) before a sleep.
class TcpAllReduceWaiting : public ::testing::TestWithParam<int> {  // microseconds of spin
 protected:
  TcpOptions Options() const {
    TcpOptions o = TestOptions();
    o.allreduce_spin = std::chrono::microseconds(GetParam());
    return o;
  }
};

TEST_P(TcpAllReduceWaiting, DeadlineMidCollectiveEndsItAndLeavesTheConnectionsUsable) {
  conformance::Communicators comms = Group(3, Options());
  ASSERT_EQ(comms.size(), 3u);
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    if (c.rank() == 2) return Status::Ok();
    std::vector<float> data = RankData(c, size_t{1} << 20);  // 4 MiB
    return c.AllReduce(data, ReduceOp::kSum, DeadlineIn(1s));
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(st[r].code(), StatusCode::kDeadlineExceeded) << "rank " << r << ": " << st[r];
    EXPECT_THAT(st[r].message(), HasSubstr("passed its deadline")) << "rank " << r;
  }
  // Rank 1 had borrowed its connection from rank 0; rank 0 had borrowed the one from rank 2.
  const std::vector<std::byte> hello = Pattern(1000, 3);
  ASSERT_TRUE(comms[0]->Send(1, 4, hello, DeadlineIn(10s)).ok());
  ASSERT_TRUE(comms[2]->Send(0, 4, hello, DeadlineIn(10s)).ok());
  Result<Message> at1 = comms[1]->Recv(0, 4, DeadlineIn(10s));
  ASSERT_TRUE(at1.ok()) << at1.status();
  EXPECT_EQ(at1->payload, hello);
  Result<Message> at0 = comms[0]->Recv(2, 4, DeadlineIn(10s));
  ASSERT_TRUE(at0.ok()) << at0.status();
  EXPECT_EQ(at0->payload, hello);
}

// A polling allreduce mutes the connection it borrows (read_readiness.h); once the call is over,
// a small message on that connection (from the left neighbour) must wake the io thread again, or
// it would wait unread until the receiver's deadline.
TEST_P(TcpAllReduceWaiting, AMessageAfterTheCallReachesItsReceiver) {
  conformance::Communicators comms = Group(2, Options());
  ASSERT_EQ(comms.size(), 2u);
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    for (int round = 0; round < 3; ++round) {
      std::vector<float> data = RankData(c, size_t{1} << 18);
      REEL_RETURN_IF_ERROR(c.AllReduce(data, ReduceOp::kSum, DeadlineIn(60s)));
      REEL_RETURN_IF_ERROR(CheckSum(c, data));
      const std::vector<std::byte> hello = Pattern(10, round);
      if (c.rank() == 1) REEL_RETURN_IF_ERROR(c.Send(0, 5, hello, DeadlineIn(60s)));
      if (c.rank() == 0) {
        Result<Message> got = c.Recv(1, 5, DeadlineIn(60s));
        REEL_RETURN_IF_ERROR(got.status());
        if (got->payload != hello) return InternalError("the message differs");
      }
    }
    return Status::Ok();
  });
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

// Rank 2 leaves (its communicator says goodbye) while ranks 0 and 1 are in an allreduce that
// needs it: rank 0 reads from it, rank 1 writes to it; both end naming it, long before their
// deadline.
TEST_P(TcpAllReduceWaiting, APeerThatLeavesMidCollectiveEndsItNamingThePeer) {
  conformance::Communicators comms = Group(3, Options());
  ASSERT_EQ(comms.size(), 3u);
  std::vector<Status> st(3);
  std::vector<std::thread> ranks;
  for (int r : {0, 1}) {
    ranks.emplace_back([&, r] {
      std::vector<float> data = RankData(*comms[r], size_t{1} << 20);
      st[r] = comms[r]->AllReduce(data, ReduceOp::kSum, DeadlineIn(600s));
    });
  }
  std::this_thread::sleep_for(50ms);  // usually mid-collective; before it, the outcome is alike
  comms[2].reset();
  for (std::thread& t : ranks) t.join();
  for (int r : {0, 1}) {
    EXPECT_EQ(st[r].code(), StatusCode::kUnavailable) << "rank " << r << ": " << st[r];
    EXPECT_THAT(st[r].message(), HasSubstr("rank 2")) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(SpinUs, TcpAllReduceWaiting, ::testing::Values(0, 2000));

// A peer that joins the allreduce later than the heartbeat timeout is not declared failed: the
// caller that borrowed the connection reads its heartbeats, and the heartbeat thread keeps
// writing ours between the allreduce's frames.
TEST(TcpAllReduce, HeartbeatsFlowWhileACallerHoldsTheConnection) {
  conformance::Communicators comms = Group(2, QuickHeartbeatOptions());
  ASSERT_EQ(comms.size(), 2u);
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    if (c.rank() == 1) std::this_thread::sleep_for(1300ms);  // 2 heartbeat timeouts
    std::vector<float> data = RankData(c, size_t{1} << 18);
    REEL_RETURN_IF_ERROR(c.AllReduce(data, ReduceOp::kSum, DeadlineIn(60s)));
    return CheckSum(c, data);
  });
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

}  // namespace
}  // namespace reel::tcp::testing
