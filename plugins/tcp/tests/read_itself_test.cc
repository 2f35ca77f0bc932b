// A large RecvInto from one rank reads that rank's connection in the calling thread
// (TcpCommunicator::ReadItself) instead of waiting for the io thread. These tests hold it to what
// the io thread guaranteed: a receive that times out mid-message consumes nothing, frames for
// other receivers arriving meanwhile reach them, two receivers of one connection both get their
// messages, heartbeats keep flowing, and a peer that leaves ends the receive.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tcp_communicator.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr size_t kLarge = TcpCommunicator::kReadItselfBytes;

void ExpectAllOk(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

// Each `count` messages of `bytes` on `tag` from rank 0 to rank 1 (Pattern(bytes, tag + i)),
// sent on a thread of rank 0's and received into place on one of rank 1's.
struct Stream {
  int tag;
  size_t bytes;
  int count;
};
std::vector<Status> SendAndReceive(conformance::Communicators& comms,
                                   const std::vector<Stream>& streams) {
  return conformance::RunOnRanks(comms, [&](Communicator& c) -> Status {
    std::vector<Status> done(streams.size());
    std::vector<std::thread> threads;
    for (size_t s = 0; s < streams.size(); ++s)
      threads.emplace_back([&, s] {
        const Stream& st = streams[s];
        for (int i = 0; i < st.count && done[s].ok(); ++i) {
          const std::vector<std::byte> want = Pattern(st.bytes, st.tag + i);
          if (c.rank() == 0) {
            done[s] = c.Send(1, st.tag, want, DeadlineIn(60s));
            continue;
          }
          std::vector<std::byte> got(st.bytes);
          done[s] = c.RecvInto(0, st.tag, got, DeadlineIn(60s));
          if (done[s].ok() && got != want)
            done[s] = InternalError("tag " + std::to_string(st.tag) + " message " +
                                    std::to_string(i) + " differs");
        }
      });
    for (auto& t : threads) t.join();
    for (const Status& s : done) REEL_RETURN_IF_ERROR(s);
    return Status::Ok();
  });
}

// Deadlines of 300 us against a 8 MiB message: most attempts end while it is arriving, and
// each must hand back what it had read, so that the next one gets the message whole.
TEST(TcpReadItself, AReceiveThatTimesOutMidMessageConsumesNothing) {
  conformance::Communicators comms = Group(2);
  ASSERT_EQ(comms.size(), 2u);
  const std::vector<std::byte> first = Pattern(8 << 20, 1), second = Pattern(kLarge, 2);
  int attempts = 0;
  std::vector<Status> st = conformance::RunOnRanks(comms, [&](Communicator& c) -> Status {
    if (c.rank() == 0) {
      REEL_RETURN_IF_ERROR(c.Send(1, 3, first, DeadlineIn(60s)));
      return c.Send(1, 3, second, DeadlineIn(60s));
    }
    // Two buffers in turn, cleared before each attempt: the one that succeeds must hold the whole
    // message, including what failed attempts had read into the other.
    std::vector<std::byte> buffers[2];
    std::vector<std::byte>* got = nullptr;
    for (Status s;; ++attempts) {
      got = &buffers[attempts % 2];
      got->assign(first.size(), std::byte{0});
      if ((s = c.RecvInto(0, 3, *got, Clock::now() + 300us)).ok()) break;
      if (s.code() != StatusCode::kDeadlineExceeded) return s;
      if (s.message().find("rank 0") == std::string::npos ||
          s.message().find("tag 3") == std::string::npos)
        return InternalError("the deadline error names neither rank 0 nor tag 3: " + s.ToString());
    }
    if (*got != first) return InternalError("the 8 MiB message arrived damaged");
    std::vector<std::byte> next(second.size());
    REEL_RETURN_IF_ERROR(c.RecvInto(0, 3, next, DeadlineIn(60s)));
    return next == second ? Status::Ok() : InternalError("the message after it differs");
  });
  ExpectAllOk(st);
  std::cout << "attempts that timed out: " << attempts << "\n";
}

// Small messages on one tag while large ones on another are read by their receiver itself.
TEST(TcpReadItself, FramesForOtherReceiversReachThem) {
  conformance::Communicators comms = Group(2);
  ASSERT_EQ(comms.size(), 2u);
  ExpectAllOk(SendAndReceive(comms, {{5, 64, 400}, {6, 1 << 20, 40}}));
}

// Two threads receive large messages from the same rank at once: one reads the connection, the
// other gets its messages through the Mailbox from it (and the roles may change).
TEST(TcpReadItself, TwoLargeReceiversOfOneConnection) {
  conformance::Communicators comms = Group(2);
  ASSERT_EQ(comms.size(), 2u);
  ExpectAllOk(SendAndReceive(comms, {{7, kLarge, 60}, {8, 4 * kLarge + 3, 60}}));
}

TEST(TcpReadItself, HeartbeatsFlowWhileAReceiverHoldsTheConnection) {
  conformance::Communicators comms = Group(2, QuickHeartbeatOptions());
  ASSERT_EQ(comms.size(), 2u);
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    const std::vector<std::byte> want = Pattern(kLarge, 9);
    if (c.rank() == 1) {
      std::this_thread::sleep_for(1300ms);  // 2 heartbeat timeouts
      return c.Send(0, 9, want, DeadlineIn(60s));
    }
    std::vector<std::byte> got(want.size());
    REEL_RETURN_IF_ERROR(c.RecvInto(1, 9, got, DeadlineIn(60s)));
    return got == want ? Status::Ok() : InternalError("the message differs");
  });
  ExpectAllOk(st);
}

TEST(TcpReadItself, APeerThatLeavesEndsTheReceive) {
  conformance::Communicators comms = Group(2);
  ASSERT_EQ(comms.size(), 2u);
  Status s;
  std::thread receiver([&] {
    std::vector<std::byte> got(kLarge);
    s = comms[0]->RecvInto(1, 10, got, DeadlineIn(60s));
  });
  std::this_thread::sleep_for(50ms);  // let it wait first (either order must work)
  comms[1].reset();
  receiver.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank 1"));
}

// An AllReduce that needs the connection a large receive on another thread is reading ends at its
// own deadline, while that receive goes on waiting for its message.
TEST(ReadItself, AnAllReduceWaitingForTheConnectionEndsAtItsDeadline) {
  TcpOptions ring = TestOptions();  // the ring's connection, not the host's shared memory
  ring.allreduce_layout = TcpOptions::Layout::kFlat;
  ring.allreduce_doubling_bytes = 0;  // the ring, not recursive doubling (the test below)
  auto comms = Group(2, ring);
  ASSERT_EQ(comms.size(), 2u);
  std::atomic<bool> receive_ended{false};
  std::thread receiver([&] {
    std::vector<std::byte> got(kLarge);
    Status s = comms[0]->RecvInto(1, 4, got, DeadlineIn(20s));  // rank 1 never sends it
    receive_ended.store(true);
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  });
  std::this_thread::sleep_for(200ms);  // the receive is reading rank 1's connection itself
  // Rank 1 takes part, so the ranks agree on the call and rank 0's ring needs the connection
  // (128 KiB: above allreduce_small_bytes, which would reduce without the ring).
  constexpr size_t kFloats = size_t{32} << 10;
  std::thread peer([&] {
    std::vector<float> theirs(kFloats, 1.0f);
    (void)comms[1]->AllReduce(theirs, ReduceOp::kSum, DeadlineIn(2s));
  });
  std::vector<float> data(kFloats, 1.0f);
  Status s = comms[0]->AllReduce(data, ReduceOp::kSum, DeadlineIn(1s));
  EXPECT_FALSE(receive_ended.load()) << "the AllReduce waited for the receive to end";
  peer.join();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("a receive on another thread is reading"));
  receiver.join();
}

// Recursive doubling borrows no connection: its messages reach the Mailbox through whichever
// thread reads, here a large receive reading rank 1's connection itself, so it completes while
// that receive goes on waiting for its message.
TEST(ReadItself, ADoublingAllReduceCompletesWhileAReceiveReadsTheConnection) {
  TcpOptions doubling = TestOptions();
  doubling.allreduce_layout = TcpOptions::Layout::kFlat;
  doubling.allreduce_small_bytes = 0;
  doubling.allreduce_doubling_bytes = size_t{1} << 20;
  auto comms = Group(2, doubling);
  ASSERT_EQ(comms.size(), 2u);
  std::atomic<bool> receive_ended{false};
  std::thread receiver([&] {
    std::vector<std::byte> got(kLarge);
    Status s = comms[0]->RecvInto(1, 4, got, DeadlineIn(5s));  // rank 1 never sends it
    receive_ended.store(true);
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  });
  std::this_thread::sleep_for(200ms);  // the receive is reading rank 1's connection itself
  constexpr size_t kFloats = size_t{32} << 10;
  std::thread peer([&] {
    std::vector<float> theirs(kFloats, 1.0f);
    EXPECT_TRUE(comms[1]->AllReduce(theirs, ReduceOp::kSum, DeadlineIn(4s)).ok());
  });
  std::vector<float> data(kFloats, 1.0f);
  Status s = comms[0]->AllReduce(data, ReduceOp::kSum, DeadlineIn(4s));
  EXPECT_FALSE(receive_ended.load()) << "the AllReduce waited for the receive to end";
  peer.join();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(data, std::vector<float>(kFloats, 2.0f));
  receiver.join();
}

}  // namespace
}  // namespace reel::tcp::testing
