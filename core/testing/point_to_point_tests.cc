// The conformance suite's point-to-point cases: ordering, any-source receives, two threads on
// different tags, large and empty messages, the largest message, the tag space, deadlines, and
// peers that leave.
#include <gmock/gmock.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "harness.h"

namespace reel::conformance {

int PointToPointTestsLinked() { return 1; }

namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::vector<std::byte> Bytes(std::initializer_list<int32_t> values) {
  std::vector<std::byte> out(values.size() * sizeof(int32_t));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}
int32_t Int(const std::vector<std::byte>& payload, size_t i) {
  int32_t v = -1;
  if (payload.size() >= (i + 1) * sizeof v)
    std::memcpy(&v, payload.data() + i * sizeof v, sizeof v);
  return v;
}
std::string Str(int v) { return std::to_string(v); }

Status ExpectCode(const Status& s, StatusCode code, const std::string& what) {
  if (s.code() == code) return Status::Ok();
  return InternalError(what + ": expected " + std::string(StatusCodeName(code)) + ", got " +
                       s.ToString());
}

// A message over kMaxMessageBytes is refused at once, before a byte is read: the bytes are an
// address range reserved without memory (mmap, no page is ever touched).
TEST_P(TransportConformance, AMessageOverTheLargestIsRefusedAtOnce) {
  const size_t bytes = kMaxMessageBytes + 1;
  void* range = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(range, MAP_FAILED);
  OnRanks(2, 2, [&](Communicator& c) -> Status {
    const std::span<const std::byte> huge(static_cast<const std::byte*>(range), bytes);
    return ExpectCode(c.Send(1 - c.rank() % 2, 1, huge, Far()), StatusCode::kInvalidArgument,
                      "Send of kMaxMessageBytes + 1 bytes");
  });
  munmap(range, bytes);
}

TEST_P(TransportConformance, MessagesKeepTheirOrderPerSourceAndTag) {
  constexpr int kPerTag = 25;
  OnRanks(2, 2, [&](Communicator& c) -> Status {
    if (c.rank() == 0) {
      for (int i = 0; i < kPerTag; ++i)
        for (int tag : {1, 2}) REEL_RETURN_IF_ERROR(c.Send(1, tag, Bytes({tag, i}), Far()));
      return Status::Ok();
    }
    if (c.rank() != 1) return Status::Ok();
    for (int tag : {2, 1}) {  // the opposite order of sending: tags are independent queues
      for (int i = 0; i < kPerTag; ++i) {
        REEL_ASSIGN_OR_RETURN(Message m, c.Recv(0, tag, Far()));
        if (m.source != 0 || m.tag != tag || Int(m.payload, 0) != tag || Int(m.payload, 1) != i)
          return InternalError("tag " + Str(tag) + ": message " + Str(i) + " arrived as (" +
                               Str(Int(m.payload, 0)) + ", " + Str(Int(m.payload, 1)) + ")");
      }
    }
    return Status::Ok();
  });
}

TEST_P(TransportConformance, ReceivesFromAnySource) {
  constexpr int kEach = 20;
  OnRanks(4, 2, [&](Communicator& c) -> Status {
    if (c.rank() != 0) {
      for (int i = 0; i < kEach; ++i)
        REEL_RETURN_IF_ERROR(c.Send(0, 3, Bytes({c.rank(), i}), Far()));
      return Status::Ok();
    }
    std::vector<int> next(static_cast<size_t>(c.size()), 0);
    for (int k = 0; k < (c.size() - 1) * kEach; ++k) {
      REEL_ASSIGN_OR_RETURN(Message m, c.Recv(kAnySource, 3, Far()));
      if (m.source < 1 || m.source >= c.size() || Int(m.payload, 0) != m.source || m.tag != 3)
        return InternalError("message claims source " + Str(m.source) + ", payload says " +
                             Str(Int(m.payload, 0)));
      if (Int(m.payload, 1) != next[static_cast<size_t>(m.source)]++)
        return InternalError("rank " + Str(m.source) + "'s messages out of order");
    }
    for (int r = 1; r < c.size(); ++r)
      if (next[static_cast<size_t>(r)] != kEach)
        return InternalError("rank " + Str(r) + ": " + Str(next[static_cast<size_t>(r)]) +
                             " messages, expected " + Str(kEach));
    return Status::Ok();
  });
}

// Two threads of every rank talk at once on their own tags (as a parameter server's request and
// reply loops do): each sends to the right and receives from the left, and neither stream may
// block, lose or mix up the other's messages.
TEST_P(TransportConformance, TwoThreadsOnDifferentTagsAtOnce) {
  constexpr int kMessages = 200;
  OnRanks(3, 2, [&](Communicator& c) -> Status {
    const int right = (c.rank() + 1) % c.size(), left = (c.rank() + c.size() - 1) % c.size();
    auto stream = [&](int tag) -> Status {
      std::thread sender_thread;
      Status sent;
      sender_thread = std::thread([&] {
        for (int i = 0; i < kMessages && sent.ok(); ++i)
          sent = c.Send(right, tag, Bytes({tag, c.rank(), i}), Far());
      });
      Status received;
      for (int i = 0; i < kMessages && received.ok(); ++i) {
        Result<Message> m = c.Recv(left, tag, Far());
        if (!m.ok()) {
          received = m.status();
        } else if (Int(m->payload, 0) != tag || Int(m->payload, 1) != left ||
                   Int(m->payload, 2) != i) {
          received = InternalError("tag " + Str(tag) + " message " + Str(i) + " arrived as (" +
                                   Str(Int(m->payload, 0)) + ", " + Str(Int(m->payload, 1)) + ", " +
                                   Str(Int(m->payload, 2)) + ")");
        }
      }
      sender_thread.join();
      return received.ok() ? sent : received;
    };
    Status other;
    std::thread second([&] { other = stream(12); });
    Status first = stream(11);
    second.join();
    return first.ok() ? other : first;
  });
}

TEST_P(TransportConformance, CarriesLargeAndEmptyMessages) {
  std::vector<std::byte> big(16 << 20);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<std::byte>((i * 131 + i / 4096) & 0xff);
  OnRanks(2, 2, [&](Communicator& c) -> Status {
    if (c.rank() == 0) {
      REEL_RETURN_IF_ERROR(c.Send(1, 4, big, Far()));
      REEL_RETURN_IF_ERROR(c.Send(1, 4, {}, Far()));
      REEL_ASSIGN_OR_RETURN(Message back, c.Recv(1, 5, Far()));
      return back.payload == big ? Status::Ok() : InternalError("echo differs");
    }
    if (c.rank() != 1) return Status::Ok();
    std::vector<std::byte> got(big.size());
    REEL_RETURN_IF_ERROR(c.RecvInto(0, 4, got, Far()));
    REEL_ASSIGN_OR_RETURN(Message empty, c.Recv(0, 4, Far()));
    if (!empty.payload.empty()) return InternalError("empty message arrived with bytes");
    if (got != big) return InternalError("16 MiB message differs");
    return c.Send(0, 5, got, Far());
  });
}

TEST_P(TransportConformance, RecvIntoRejectsAWrongSize) {
  OnRanks(2, 2, [&](Communicator& c) -> Status {
    if (c.rank() == 0) return c.Send(1, 6, Bytes({1, 2, 3}), Far());
    if (c.rank() != 1) return Status::Ok();
    std::vector<std::byte> out(8);
    Status s = c.RecvInto(0, 6, out, Far());
    if (s.code() != StatusCode::kInvalidArgument || s.message().find("12") == std::string::npos)
      return InternalError("expected InvalidArgument naming 12 bytes, got " + s.ToString());
    return Status::Ok();
  });
}

// The backend carries every tag of [0, kMaxTag] (the collectives use the top of it) and refuses
// the others at once.
TEST_P(TransportConformance, BackendCarriesEveryTagUpToMaxTag) {
  const std::vector<int> tags = {0, 1, kCollectiveTagBase - 1, kCollectiveTagBase, kMaxTag};
  OnRanks(
      2, 2,
      [&](Communicator& c) -> Status {
        for (int tag : {-1, kMaxTag + 1}) {
          REEL_RETURN_IF_ERROR(ExpectCode(c.Send((c.rank() + 1) % c.size(), tag, Bytes({1}), Far()),
                                          StatusCode::kInvalidArgument, "Send tag " + Str(tag)));
          REEL_RETURN_IF_ERROR(ExpectCode(c.Recv(kAnySource, tag, Far()).status(),
                                          StatusCode::kInvalidArgument, "Recv tag " + Str(tag)));
        }
        if (c.rank() == 0)
          for (int tag : tags) REEL_RETURN_IF_ERROR(c.Send(1, tag, Bytes({tag}), Far()));
        if (c.rank() == 1)
          for (int tag : tags) {
            REEL_ASSIGN_OR_RETURN(Message m, c.Recv(0, tag, Far()));
            if (m.tag != tag || Int(m.payload, 0) != tag)
              return InternalError("tag " + Str(tag) + " arrived as tag " + Str(m.tag));
          }
        return Status::Ok();
      },
      Layer::kBackend);
}

// Through the collectives layer users get [0, kCollectiveTagBase); the rest is refused, as are
// ranks outside the group.
TEST_P(TransportConformance, UsersCannotTakeCollectiveTagsOrBadRanks) {
  OnRanks(2, 2, [&](Communicator& c) -> Status {
    const int other = (c.rank() + 1) % c.size();
    for (int tag : {-1, kCollectiveTagBase, kCollectiveTagBase + 5, kMaxTag, kMaxTag + 1}) {
      REEL_RETURN_IF_ERROR(ExpectCode(c.Send(other, tag, Bytes({1}), Far()),
                                      StatusCode::kInvalidArgument, "Send tag " + Str(tag)));
      REEL_RETURN_IF_ERROR(ExpectCode(c.Recv(other, tag, Far()).status(),
                                      StatusCode::kInvalidArgument, "Recv tag " + Str(tag)));
    }
    REEL_RETURN_IF_ERROR(ExpectCode(c.Send(c.size(), 0, Bytes({1}), Far()),
                                    StatusCode::kInvalidArgument, "Send to rank size()"));
    REEL_RETURN_IF_ERROR(ExpectCode(c.Send(-1, 0, Bytes({1}), Far()), StatusCode::kInvalidArgument,
                                    "Send to rank -1"));
    REEL_RETURN_IF_ERROR(ExpectCode(c.Recv(-5, 0, Far()).status(), StatusCode::kInvalidArgument,
                                    "Recv from rank -5"));
    REEL_RETURN_IF_ERROR(ExpectCode(c.Recv(c.size(), 0, Far()).status(),
                                    StatusCode::kInvalidArgument, "Recv from rank size()"));
    // The highest user tag works.
    if (c.rank() == 0) return c.Send(1, kCollectiveTagBase - 1, Bytes({9}), Far());
    if (c.rank() == 1) return c.Recv(0, kCollectiveTagBase - 1, Far()).status();
    return Status::Ok();
  });
}

// A receive past its deadline says so, naming the peer and tag, and consumes nothing: a message
// that arrives later is still delivered.
TEST_P(TransportConformance, PassedDeadlineNamesPeerAndTag) {
  OnRanks(2, 2, [&](Communicator& c) -> Status {
    if (c.rank() == 0) {
      Result<Message> m = c.Recv(1, 7, DeadlineIn(20ms));
      REEL_RETURN_IF_ERROR(ExpectCode(m.status(), StatusCode::kDeadlineExceeded, "Recv(1, 7)"));
      if (m.status().message().find("rank 1") == std::string::npos ||
          m.status().message().find("tag 7") == std::string::npos)
        return InternalError("deadline error does not name rank 1 and tag 7: " +
                             m.status().ToString());
      Result<Message> any = c.Recv(kAnySource, 8, DeadlineIn(20ms));
      REEL_RETURN_IF_ERROR(ExpectCode(any.status(), StatusCode::kDeadlineExceeded, "Recv(any, 8)"));
    }
    REEL_RETURN_IF_ERROR(c.Barrier(Far()));  // rank 1 sends only after rank 0 gave up
    if (c.rank() == 1) return c.Send(0, 7, Bytes({42}), Far());
    if (c.rank() != 0) return Status::Ok();
    REEL_ASSIGN_OR_RETURN(Message late, c.Recv(1, 7, Far()));
    return Int(late.payload, 0) == 42 ? Status::Ok() : InternalError("late message differs");
  });
}

TEST_P(TransportConformance, UserMessagesDoNotMixWithCollectives) {
  OnRanks(3, 2, [&](Communicator& c) -> Status {
    const int n = c.size(), right = (c.rank() + 1) % n, left = (c.rank() + n - 1) % n;
    REEL_RETURN_IF_ERROR(c.Send(right, 0, Bytes({100 + c.rank()}), Far()));
    std::vector<float> data(1000, static_cast<float>(c.rank()));
    REEL_RETURN_IF_ERROR(c.AllReduce(data, ReduceOp::kSum, Far()));
    REEL_RETURN_IF_ERROR(c.Barrier(Far()));
    REEL_ASSIGN_OR_RETURN(Message m, c.Recv(kAnySource, 0, Far()));
    if (m.source != left || m.payload.size() != 4 || Int(m.payload, 0) != 100 + left)
      return InternalError("user message got mixed up with a collective");
    const float sum = static_cast<float>(n * (n - 1) / 2);
    for (float v : data)
      if (v != sum) return InternalError("allreduce disturbed by a user message");
    return Status::Ok();
  });
}

// ---- Only with ranks as threads: a peer leaving, and Connect deadlines. ----

TEST_P(TransportConformance, PeerThatLeftIsUnavailableNotAHang) {
  Communicators comms = ThreadsOnly(3, "a rank leaves mid-test");
  if (comms.empty()) return;
  ASSERT_TRUE(comms[2]->Send(0, 9, Bytes({7}), Far()).ok());
  comms[2].reset();  // rank 2 leaves
  // What it sent before leaving is still delivered, then its absence is reported.
  Result<Message> before = comms[0]->Recv(2, 9, Far());
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(Int(before->payload, 0), 7);
  Result<Message> after = comms[0]->Recv(2, 9, Far());
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable) << after.status();
  EXPECT_THAT(after.status().message(), HasSubstr("rank 2"));
  // A collective that needs rank 2 fails instead of hanging (rank 0 receives from rank 2 in the
  // ring; rank 1 stays out, so nobody else is involved).
  std::vector<float> data(10, 1.0f);
  Status s = comms[0]->AllReduce(data, ReduceOp::kSum, Far());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank 2"));
}

TEST_P(TransportConformance, LeavingWakesAWaitingReceiver) {
  Communicators comms = ThreadsOnly(2, "a rank leaves mid-test");
  if (comms.empty()) return;
  Status s;
  std::thread waiter([&] { s = comms[0]->Recv(1, 10, Far()).status(); });
  std::this_thread::sleep_for(20ms);  // let the waiter block first (either order must work)
  comms[1].reset();
  waiter.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank 1"));
}

TEST_P(TransportConformance, ConnectPastItsDeadlineNamesTheMissingRank) {
  if (per_process()) GTEST_SKIP() << "only with ranks as threads of one process: rank 0 stays away";
  Result<Group> group = GetParam().group();
  ASSERT_TRUE(group.ok()) << group.status();
  // Rank 1 of 2 joins; rank 0 never does.
  auto alone = group->transport->Connect({1, 2, group->coordinator}, DeadlineIn(300ms));
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.status().code(), StatusCode::kDeadlineExceeded) << alone.status();
  EXPECT_THAT(alone.status().message(), HasSubstr("rank 0"));
}

}  // namespace
}  // namespace reel::conformance
