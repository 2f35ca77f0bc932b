// The mailbox without sockets: its verdicts on peers, and how it stages arriving messages.
#include "mailbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "frame_reader.h"

namespace reel::tcp {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Rank 2 fails; rank 1, whose own call failed because of it, leaves. A send to rank 1 must name
// rank 2 (the cause), as a receive does: under `reel launch` the ranks a failure leaves behind
// exit one after the other, and the last one's error named only the rank that left before it.
// The receive budget: complete messages nobody has taken count against their source; taking one
// that brings the source back under the budget says so (the io thread then reads it again).
TEST(Mailbox, MessagesWaitingForAReceiveFillTheirSourcesBudget) {
  Mailbox box("tcp rank 0", 0, 3);
  std::vector<int> rooms;
  box.SetBudget(1000, [&](int source) { rooms.push_back(source); });
  const std::vector<std::byte> six_hundred(600);
  box.DeliverCopy(1, 5, six_hundred);
  EXPECT_TRUE(box.HasRoom(1));
  box.DeliverCopy(1, 6, six_hundred);
  EXPECT_FALSE(box.HasRoom(1));
  EXPECT_EQ(box.HeldBytes(1), 1200u);
  EXPECT_TRUE(box.HasRoom(2)) << "the budget is per source";
  ASSERT_TRUE(box.Recv(1, 6, DeadlineIn(std::chrono::seconds(1))).ok());
  EXPECT_TRUE(box.HasRoom(1));
  EXPECT_EQ(rooms, std::vector<int>{1});
  std::vector<std::byte> out(600);
  ASSERT_TRUE(box.RecvInto(1, 5, out, DeadlineIn(std::chrono::seconds(1))).ok());
  EXPECT_EQ(box.HeldBytes(1), 0u);
  EXPECT_EQ(rooms, std::vector<int>{1}) << "only a source that was full is announced";
}

TEST(Mailbox, APeerLeavingABrokenGroupNamesTheRankThatFailed) {
  Mailbox box("tcp rank 0", 0, 3);
  ASSERT_TRUE(box.PeerStatus(1).ok());
  ASSERT_TRUE(box.PeerFailed(2, "its connection was reset"));
  box.PeerLeft(1);
  const Status s = box.PeerStatus(1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("rank 2 is unavailable: its connection was reset"),
                                 HasSubstr("since then rank 1 has left the group")));
  EXPECT_EQ(box.PeerStatus(2).message(),
            "tcp rank 0: rank 2 is unavailable: its connection was reset");
}

// The same when the rank that gave up exits without a goodbye (a process that ends after its
// call failed): it counts as failed too, but the first failure is the one named.
TEST(Mailbox, ARankFailingAfterAnotherNamesTheFirstFailure) {
  Mailbox box("tcp rank 2", 2, 3);
  ASSERT_TRUE(box.PeerFailed(1, "reported by rank 0: its connection was reset"));
  ASSERT_TRUE(box.PeerFailed(0, "it closed its connection without saying goodbye"));
  const Status s = box.PeerStatus(0);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("rank 1 is unavailable: reported by rank 0"),
                    HasSubstr("since then rank 0 is unavailable: it closed its connection")));
}

// With isolated failures (reel tune's workers) a departure is only a departure.
TEST(Mailbox, WithIsolatedFailuresALeavingPeerIsNamedAlone) {
  Mailbox box("tcp rank 0", 0, 3, /*isolate_failures=*/true);
  ASSERT_TRUE(box.PeerFailed(2, "its connection was reset"));
  box.PeerLeft(1);
  EXPECT_EQ(box.PeerStatus(1).message(), "tcp rank 0: rank 1 has left the group");
}

// A departure in a healthy group is named as such.
TEST(Mailbox, APeerLeavingAHealthyGroupHasLeft) {
  Mailbox box("tcp rank 0", 0, 2);
  box.PeerLeft(1);
  EXPECT_EQ(box.PeerStatus(1).message(), "tcp rank 0: rank 1 has left the group");
}

// A frame header's length is a claim. A peer that claims 512 GiB and sends a few bytes used to
// make the rank allocate the 512 GiB at the first byte (bad_alloc or the OOM killer; found by the
// tcp_stream fuzzer): staging now grows with the bytes that arrive.
TEST(Mailbox, AClaimedHugeMessageAllocatesOnlyWhatArrives) {
  Mailbox box("tcp rank 0", 0, 2);
  Mailbox::Inbound in = box.Begin(1, 7, uint64_t{1} << 39);
  std::span<std::byte> next = in.Next();
  ASSERT_EQ(next.size(), Mailbox::kChunkBytes);
  std::fill(next.begin(), next.begin() + 100, std::byte{1});
  in.Advance(100);
  EXPECT_EQ(in.remaining(), (uint64_t{1} << 39) - 100);
  in.Fail(UnavailableError("its connection was reset in the middle of a message"));
}

// An unclaimed message of several chunks, staged as it grows, arrives byte for byte, whether a
// receive comes after it is complete or claims it mid-way.
TEST(Mailbox, AStagedMessageGrowsAndArrivesWhole) {
  const size_t length = 5 * Mailbox::kChunkBytes + 12345;
  std::vector<std::byte> sent(length);
  for (size_t i = 0; i < length; ++i) sent[i] = static_cast<std::byte>(i * 131 + i / 7);
  for (size_t claim_after : {length, 2 * Mailbox::kChunkBytes + 1}) {
    Mailbox box("tcp rank 0", 0, 2);
    Mailbox::Inbound in = box.Begin(1, 3, length);
    std::vector<std::byte> got(length);
    Mailbox::Posted p;
    p.source = 1;
    p.tag = 3;
    p.out = got;
    bool posted = false;
    while (in.remaining() > 0) {
      if (!posted && length - in.remaining() >= claim_after) box.Post(p), posted = true;
      std::span<std::byte> dst = in.Next();
      std::memcpy(dst.data(), sent.data() + (length - in.remaining()), dst.size());
      in.Advance(dst.size());
    }
    in.Finish();
    if (posted) {
      ASSERT_TRUE(box.Done(p));
      ASSERT_TRUE(p.status.ok()) << p.status;
    } else {
      ASSERT_TRUE(box.RecvInto(1, 3, got, DeadlineIn(std::chrono::seconds(5))).ok());
    }
    EXPECT_TRUE(got == sent) << "claim after " << claim_after;
  }
}

// The receive budget holds inside a message too: one larger than the budget that nobody waits
// for is staged only up to the budget (plus the chunk that crossed it); then the reader must
// stop (Ready), until a receive asks for it and the rest goes straight into that receive.
std::vector<std::byte> Numbered(size_t length) {
  std::vector<std::byte> bytes(length);
  for (size_t i = 0; i < length; ++i) bytes[i] = static_cast<std::byte>(i * 131 + i / 7);
  return bytes;
}

// Reads `sent` into `in` (as a socket would deliver it) while the reader may, from where it is.
void Feed(Mailbox::Inbound& in, const std::vector<std::byte>& sent) {
  while (in.remaining() > 0 && in.Ready()) {
    std::span<std::byte> dst = in.Next();
    std::memcpy(dst.data(), sent.data() + (sent.size() - in.remaining()), dst.size());
    in.Advance(dst.size());
  }
}

constexpr uint64_t kSmallBudget = 100000;

TEST(Mailbox, AMessageBeyondTheBudgetIsStagedOnlyUpToItUntilAReceiveAsks) {
  Mailbox box("tcp rank 0", 0, 3);
  std::vector<int> rooms;
  box.SetBudget(kSmallBudget, [&](int source) { rooms.push_back(source); });
  const std::vector<std::byte> sent = Numbered(3 * Mailbox::kChunkBytes + 7);
  Mailbox::Inbound in = box.Begin(1, 3, sent.size());
  Feed(in, sent);
  EXPECT_EQ(in.remaining(), sent.size() - Mailbox::kChunkBytes) << "read past the budget";
  EXPECT_EQ(box.HeldBytes(1), Mailbox::kChunkBytes);
  EXPECT_FALSE(in.Ready());
  EXPECT_TRUE(box.HasRoom(2)) << "the budget is per source";
  std::vector<std::byte> got(sent.size());
  Mailbox::Posted p;
  p.source = 1;
  p.tag = 3;
  p.out = got;
  box.Post(p);
  EXPECT_EQ(rooms, std::vector<int>{1}) << "the paused reader is told a receive waits";
  ASSERT_TRUE(in.Ready());  // claimed: what was staged moved into the receive's buffer
  EXPECT_EQ(box.HeldBytes(1), 0u);
  Feed(in, sent);
  in.Finish();
  ASSERT_TRUE(box.Done(p));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_TRUE(got == sent);
}

// A Recv (which has no buffer to claim the message with) waiting for it asks for its bytes: they
// are staged past the budget, for that receive. A Recv for another tag does not.
TEST(Mailbox, ARecvWaitingForAMessageBeyondTheBudgetLetsItArrive) {
  Mailbox box("tcp rank 0", 0, 2);
  std::atomic<int> rooms{0};
  box.SetBudget(kSmallBudget, [&](int) { ++rooms; });
  const std::vector<std::byte> sent = Numbered(3 * Mailbox::kChunkBytes + 7);
  Mailbox::Inbound in = box.Begin(1, 3, sent.size());
  Feed(in, sent);
  ASSERT_FALSE(in.Ready());
  std::thread other([&] {
    EXPECT_EQ(box.Recv(1, 4, DeadlineIn(std::chrono::milliseconds(300))).status().code(),
              StatusCode::kDeadlineExceeded);
  });
  while (rooms.load() < 1) std::this_thread::yield();
  EXPECT_FALSE(in.Ready()) << "a Recv of another tag let it pass the budget";
  other.join();
  Result<Message> m = InternalError("not received");
  std::thread receiver([&] { m = box.Recv(1, 3, DeadlineIn(std::chrono::seconds(30))); });
  while (rooms.load() < 2) std::this_thread::yield();
  EXPECT_TRUE(in.Ready());
  Feed(in, sent);
  ASSERT_EQ(in.remaining(), 0u);
  in.Finish();
  receiver.join();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->payload == sent);
  EXPECT_EQ(box.HeldBytes(1), 0u);
}

// A receive that gives up while its message streams into its buffer hands the part read back:
// held for nobody now, it counts against the budget (it used not to), and the reader stops
// there; a later receive gets the message whole.
TEST(Mailbox, APartHandedBackByAReceiveThatGaveUpCountsAgainstTheBudget) {
  Mailbox box("tcp rank 0", 0, 2);
  box.SetBudget(kSmallBudget, [](int) {});
  const std::vector<std::byte> sent = Numbered(3 * Mailbox::kChunkBytes + 7);
  std::vector<std::byte> first(sent.size());
  Mailbox::Posted gave_up;
  gave_up.source = 1;
  gave_up.tag = 3;
  gave_up.out = first;
  box.Post(gave_up);
  Mailbox::Inbound in = box.Begin(1, 3, sent.size());  // claimed at once
  std::span<std::byte> dst = in.Next();
  std::memcpy(dst.data(), sent.data(), dst.size());
  in.Advance(dst.size());
  EXPECT_EQ(box.HeldBytes(1), 0u) << "bytes in a receive's buffer are the receiver's";
  in.Unclaim(gave_up, DeadlineExceededError("passed its deadline"));
  ASSERT_TRUE(box.Done(gave_up));
  EXPECT_EQ(gave_up.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(box.HeldBytes(1), Mailbox::kChunkBytes);
  EXPECT_FALSE(in.Ready());
  std::vector<std::byte> got(sent.size());
  Mailbox::Posted later;
  later.source = 1;
  later.tag = 3;
  later.out = got;
  box.Post(later);
  Feed(in, sent);
  ASSERT_EQ(in.remaining(), 0u);
  in.Finish();
  ASSERT_TRUE(box.Done(later));
  ASSERT_TRUE(later.status.ok()) << later.status;
  EXPECT_TRUE(got == sent);
  EXPECT_EQ(box.HeldBytes(1), 0u);
}

// A peer whose frame claims more than the largest message (here 2^40 bytes) breaks the
// protocol: its reader fails naming the length before any of it is staged, and another peer's
// messages still arrive.
TEST(FrameReader, AFrameClaimingMoreThanTheLargestMessageFailsItsPeerAndNoOneElse) {
  Mailbox box("tcp rank 0", 0, 3, /*isolate_failures=*/true);
  box.SetBudget(kSmallBudget, [](int) {});
  FrameReader hostile(box, 1, 3, [](int, const std::string&) {});
  FrameReader fine(box, 2, 3, [](int, const std::string&) {});
  auto feed = [](FrameReader& r, std::span<const std::byte> bytes) {
    while (!bytes.empty() && r.state() == FrameReader::State::kReading && r.Ready()) {
      std::span<std::byte> to = r.Buffer();
      const size_t n = std::min(to.size(), bytes.size());
      std::memcpy(to.data(), bytes.data(), n);
      r.Consumed(n);
      bytes = bytes.subspan(n);
    }
  };
  feed(hostile, EncodeFrameHeader({FrameType::kData, 1, 5, uint64_t{1} << 40}));
  EXPECT_EQ(hostile.state(), FrameReader::State::kFailed);
  EXPECT_THAT(hostile.failure(),
              HasSubstr("not the protocol: frame header: payload of 1099511627776 bytes exceeds "
                        "the limit of 2147483647"));
  EXPECT_FALSE(hostile.mid_message());
  EXPECT_EQ(box.HeldBytes(1), 0u);
  const std::vector<std::byte> payload = Numbered(1000);
  feed(fine, EncodeFrameHeader({FrameType::kData, 2, 5, payload.size()}));
  feed(fine, payload);
  Result<Message> m = box.Recv(2, 5, DeadlineIn(std::chrono::seconds(5)));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->payload == payload);
}

// Native collectives (collective frames): a message of a collective that has ended on this rank
// is dropped and counted, whether it was queued already or arrives later; the running collective's
// and later ones' messages stay, and user tags are never touched.
void Deliver(Mailbox& box, int source, int tag, std::vector<std::byte> payload) {
  box.DeliverCopy(source, tag, payload);
}

TEST(Mailbox, MessagesOfEndedCollectivesAreDroppedAndCounted) {
  Mailbox box("tcp rank 0", 0, 2);
  const std::vector<std::byte> four(4, std::byte{7});
  Deliver(box, 1, Mailbox::CollectiveTag(3), four);  // left over from collective 3
  Deliver(box, 1, Mailbox::CollectiveTag(4), four);  // the next one's, early
  Deliver(box, 1, 5, four);                          // a user message
  EXPECT_EQ(box.StartCollective(4), 1u);             // 3 ended here
  EXPECT_EQ(box.stale_dropped(), 1u);
  Deliver(box, 1, Mailbox::CollectiveTag(2), four);  // arrives after its collective ended
  EXPECT_EQ(box.stale_dropped(), 2u);
  EXPECT_EQ(box.StartCollective(4), 1u);  // counted once since the last call

  std::vector<std::byte> got(4);
  EXPECT_TRUE(
      box.RecvInto(1, Mailbox::CollectiveTag(4), got, DeadlineIn(std::chrono::seconds(5))).ok());
  EXPECT_EQ(got, four);
  EXPECT_TRUE(box.RecvInto(1, 5, got, DeadlineIn(std::chrono::seconds(5))).ok());
  // Nothing of collective 3 is left to receive.
  const Status none =
      box.RecvInto(1, Mailbox::CollectiveTag(3), got, DeadlineIn(std::chrono::milliseconds(1)));
  EXPECT_EQ(none.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(none.message(), HasSubstr("collective 3"));
}

// A message that began arriving while its collective ran and ends after the next one started
// is dropped too, not queued forever.
TEST(Mailbox, AMessageCompletedAfterItsCollectiveEndedIsDropped) {
  Mailbox box("tcp rank 0", 0, 2);
  box.StartCollective(0);
  Mailbox::Inbound in = box.Begin(1, Mailbox::CollectiveTag(0), 8);
  std::span<std::byte> first = in.Next();
  std::fill(first.begin(), first.end(), std::byte{1});
  in.Advance(first.size());
  box.StartCollective(1);
  in.Finish();
  EXPECT_EQ(box.stale_dropped(), 1u);
}

// Collective numbers wrap at 2^31: just after the wrap, the last numbers before it have ended
// and the first ones after it have not.
TEST(Mailbox, CollectiveNumbersCompareAcrossTheirWrap) {
  Mailbox box("tcp rank 0", 0, 2);
  const std::vector<std::byte> one(1);
  Deliver(box, 1, Mailbox::CollectiveTag(kCollectiveSeqMask), one);  // 2^31 - 1
  Deliver(box, 1, Mailbox::CollectiveTag(1), one);
  EXPECT_EQ(box.StartCollective(kCollectiveSeqMask + 1), 1u);  // collective 0 after the wrap
  std::vector<std::byte> got(1);
  EXPECT_TRUE(
      box.RecvInto(1, Mailbox::CollectiveTag(1), got, DeadlineIn(std::chrono::seconds(5))).ok());
  EXPECT_NE(Mailbox::CollectiveTag(0), Mailbox::CollectiveTag(1));
  EXPECT_EQ(Mailbox::CollectiveTag(0), Mailbox::CollectiveTag(kCollectiveSeqMask + 1));
  EXPECT_LT(Mailbox::CollectiveTag(kCollectiveSeqMask), 0);
}

}  // namespace
}  // namespace reel::tcp
