// The transport conformance suite (see transport_conformance.h for how a transport joins).
#include "comm/transport_conformance.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

namespace reel::core::conformance {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Long enough never to fire on a loaded machine; only tests that expect a timeout use short ones.
Deadline Far() { return DeadlineIn(60s); }

std::vector<std::byte> Bytes(std::initializer_list<int32_t> values) {
  std::vector<std::byte> out(values.size() * sizeof(int32_t));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}
int32_t Int(const std::vector<std::byte>& payload, size_t i) {
  int32_t v;
  std::memcpy(&v, payload.data() + i * sizeof v, sizeof v);
  return v;
}

void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

TEST_P(TransportConformance, MessagesKeepTheirOrderPerSourceAndTag) {
  Communicators comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  constexpr int kPerTag = 25;
  ExpectAllOk(RunOnRanks(comms, [&](Communicator& c) -> Status {
    if (c.rank() == 0) {
      for (int i = 0; i < kPerTag; ++i)
        for (int tag : {1, 2}) REEL_RETURN_IF_ERROR(c.Send(1, tag, Bytes({tag, i}), Far()));
      return Status::Ok();
    }
    for (int tag : {2, 1}) {  // the opposite order of sending: tags are independent queues
      for (int i = 0; i < kPerTag; ++i) {
        REEL_ASSIGN_OR_RETURN(Message m, c.Recv(0, tag, Far()));
        if (m.source != 0 || m.tag != tag || Int(m.payload, 0) != tag || Int(m.payload, 1) != i)
          return InternalError("tag " + std::to_string(tag) + ": message " + std::to_string(i) +
                               " arrived as (" + std::to_string(Int(m.payload, 0)) + ", " +
                               std::to_string(Int(m.payload, 1)) + ")");
      }
    }
    return Status::Ok();
  }));
}

TEST_P(TransportConformance, ReceivesFromAnySource) {
  Communicators comms = Connect(4);
  ASSERT_EQ(comms.size(), 4u);
  constexpr int kEach = 20;
  ExpectAllOk(RunOnRanks(comms, [&](Communicator& c) -> Status {
    if (c.rank() != 0) {
      for (int i = 0; i < kEach; ++i)
        REEL_RETURN_IF_ERROR(c.Send(0, 3, Bytes({c.rank(), i}), Far()));
      return Status::Ok();
    }
    std::vector<int> next(4, 0);
    for (int k = 0; k < 3 * kEach; ++k) {
      REEL_ASSIGN_OR_RETURN(Message m, c.Recv(kAnySource, 3, Far()));
      if (m.source < 1 || m.source > 3 || Int(m.payload, 0) != m.source || m.tag != 3)
        return InternalError("message claims source " + std::to_string(m.source) +
                             ", payload says " + std::to_string(Int(m.payload, 0)));
      if (Int(m.payload, 1) != next[m.source]++)
        return InternalError("rank " + std::to_string(m.source) + "'s messages out of order");
    }
    if (next != std::vector<int>{0, kEach, kEach, kEach})
      return InternalError("wrong message counts");
    return Status::Ok();
  }));
}

TEST_P(TransportConformance, CarriesLargeAndEmptyMessages) {
  Communicators comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<std::byte> big(16 << 20);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<std::byte>((i * 131 + i / 4096) & 0xff);
  ExpectAllOk(RunOnRanks(comms, [&](Communicator& c) -> Status {
    if (c.rank() == 0) {
      REEL_RETURN_IF_ERROR(c.Send(1, 4, big, Far()));
      REEL_RETURN_IF_ERROR(c.Send(1, 4, {}, Far()));
      REEL_ASSIGN_OR_RETURN(Message back, c.Recv(1, 5, Far()));
      return back.payload == big ? Status::Ok() : InternalError("echo differs");
    }
    std::vector<std::byte> got(big.size());
    REEL_RETURN_IF_ERROR(c.RecvInto(0, 4, got, Far()));
    REEL_ASSIGN_OR_RETURN(Message empty, c.Recv(0, 4, Far()));
    if (!empty.payload.empty()) return InternalError("empty message arrived with bytes");
    if (got != big) return InternalError("16 MiB message differs");
    return c.Send(0, 5, got, Far());
  }));
}

TEST_P(TransportConformance, RecvIntoRejectsAWrongSize) {
  Communicators comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  ExpectAllOk(RunOnRanks(comms, [&](Communicator& c) -> Status {
    if (c.rank() == 0) return c.Send(1, 6, Bytes({1, 2, 3}), Far());
    std::vector<std::byte> out(8);
    Status s = c.RecvInto(0, 6, out, Far());
    if (s.code() != StatusCode::kInvalidArgument || s.message().find("12") == std::string::npos)
      return InternalError("expected InvalidArgument naming 12 bytes, got " + s.ToString());
    return Status::Ok();
  }));
}

TEST_P(TransportConformance, PassedDeadlineNamesRankAndTag) {
  Communicators comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  Result<Message> m = comms[0]->Recv(1, 7, DeadlineIn(20ms));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDeadlineExceeded) << m.status();
  EXPECT_THAT(m.status().message(), HasSubstr("rank 0"));
  EXPECT_THAT(m.status().message(), HasSubstr("tag 7"));
  Result<Message> any = comms[1]->Recv(kAnySource, 8, DeadlineIn(20ms));
  EXPECT_EQ(any.status().code(), StatusCode::kDeadlineExceeded) << any.status();
  // A message that arrives later is still delivered: the timeout consumed nothing.
  ASSERT_TRUE(comms[1]->Send(0, 7, Bytes({42}), Far()).ok());
  Result<Message> late = comms[0]->Recv(1, 7, Far());
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(Int(late->payload, 0), 42);
}

TEST_P(TransportConformance, PeerThatLeftIsUnavailableNotAHang) {
  Communicators comms = Connect(3);
  ASSERT_EQ(comms.size(), 3u);
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
  Communicators comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  Status s;
  std::thread waiter([&] { s = comms[0]->Recv(1, 10, Far()).status(); });
  std::this_thread::sleep_for(20ms);  // let the waiter block first (either order must work)
  comms[1].reset();
  waiter.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank 1"));
}

TEST_P(TransportConformance, ReservedAndBadTagsAreRefused) {
  Communicators comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  for (int tag : {-1, kCollectiveTagBase, kCollectiveTagBase + 5}) {
    Status s = comms[0]->Send(1, tag, Bytes({1}), Far());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "tag " << tag << ": " << s;
    EXPECT_EQ(comms[0]->Recv(1, tag, Far()).status().code(), StatusCode::kInvalidArgument) << tag;
  }
  EXPECT_EQ(comms[0]->Send(2, 0, Bytes({1}), Far()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comms[0]->Recv(-5, 0, Far()).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(TransportConformance, UserMessagesDoNotMixWithCollectives) {
  Communicators comms = Connect(3);
  ASSERT_EQ(comms.size(), 3u);
  ExpectAllOk(RunOnRanks(comms, [&](Communicator& c) -> Status {
    const int right = (c.rank() + 1) % 3;
    REEL_RETURN_IF_ERROR(c.Send(right, 0, Bytes({100 + c.rank()}), Far()));
    std::vector<float> data(1000, static_cast<float>(c.rank()));
    REEL_RETURN_IF_ERROR(c.AllReduce(data, ReduceOp::kSum, Far()));
    REEL_RETURN_IF_ERROR(c.Barrier(Far()));
    REEL_ASSIGN_OR_RETURN(Message m, c.Recv(kAnySource, 0, Far()));
    const int left = (c.rank() + 2) % 3;
    if (m.source != left || m.payload.size() != 4 || Int(m.payload, 0) != 100 + left)
      return InternalError("user message got mixed up with a collective");
    for (float v : data)
      if (v != 3.0f) return InternalError("allreduce disturbed by a user message");
    return Status::Ok();
  }));
}

TEST_P(TransportConformance, CollectiveArgumentErrorsAreReported) {
  Communicators comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<std::byte> small(4), out(7);
  EXPECT_EQ(comms[0]->Broadcast(small, 2, Far()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comms[0]->AllGather(small, out, Far()).code(), StatusCode::kInvalidArgument);
  // Ranks disagreeing about the size get an error, not a hang or a corrupt result. (The refused
  // calls above sent nothing and took no collective tag, so rank 0 is still in step.)
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    std::vector<float> data(c.rank() == 0 ? 10 : 12, 1.0f);
    return c.AllReduce(data, ReduceOp::kSum, DeadlineIn(10s));
  });
  for (size_t r = 0; r < st.size(); ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kInvalidArgument) << "rank " << r << ": " << st[r];
    EXPECT_THAT(st[r].message(), HasSubstr("same size")) << "rank " << r;
  }
}

// ---- Collectives: every size against a sequential computation in the test. ----

// Multiples of 1/8 in [-125, 125]: every sum of up to five is exact in float, so results must
// match bit for bit whatever order the algorithm adds in.
float Value(int rank, size_t i) {
  return static_cast<float>(static_cast<int64_t>((rank * 7919 + i * 104729) % 2001) - 1000) / 8.0f;
}

Status CheckAllReduce(Communicator& c, size_t count, ReduceOp op, const char* name) {
  std::vector<float> data(count), want(count);
  for (size_t i = 0; i < count; ++i) {
    data[i] = Value(c.rank(), i);
    want[i] = Value(0, i);
    for (int r = 1; r < c.size(); ++r) {
      float v = Value(r, i);
      want[i] = op == ReduceOp::kSum   ? want[i] + v
                : op == ReduceOp::kMax ? std::max(want[i], v)
                                       : std::min(want[i], v);
    }
  }
  REEL_RETURN_IF_ERROR(c.AllReduce(data, op, Far()));
  for (size_t i = 0; i < count; ++i)
    if (data[i] != want[i])
      return InternalError(std::string("AllReduce ") + name + " index " + std::to_string(i) +
                           ": got " + std::to_string(data[i]) + ", want " +
                           std::to_string(want[i]));
  return Status::Ok();
}

Status CheckBroadcast(Communicator& c, size_t count, int root) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = Value(c.rank(), i);
  REEL_RETURN_IF_ERROR(c.Broadcast(std::as_writable_bytes(std::span<float>(data)), root, Far()));
  for (size_t i = 0; i < count; ++i)
    if (data[i] != Value(root, i))
      return InternalError("Broadcast from " + std::to_string(root) + " index " +
                           std::to_string(i));
  return Status::Ok();
}

Status CheckAllGather(Communicator& c, size_t count) {
  std::vector<float> in(count), out(count * static_cast<size_t>(c.size()), -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = Value(c.rank(), i);
  REEL_RETURN_IF_ERROR(c.AllGather(std::as_bytes(std::span<const float>(in)),
                                   std::as_writable_bytes(std::span<float>(out)), Far()));
  for (int r = 0; r < c.size(); ++r)
    for (size_t i = 0; i < count; ++i)
      if (out[static_cast<size_t>(r) * count + i] != Value(r, i))
        return InternalError("AllGather block " + std::to_string(r) + " index " +
                             std::to_string(i));
  return Status::Ok();
}

TEST_P(CollectiveConformance, MatchSequentialComputation) {
  const auto& [transport, n, count64] = GetParam();
  const size_t count = static_cast<size_t>(count64);
  Result<Communicators> comms = transport.connect(n);
  ASSERT_TRUE(comms.ok()) << comms.status();
  std::vector<std::atomic<int>> arrived(3);
  std::vector<Status> st = RunOnRanks(*comms, [&](Communicator& c) -> Status {
    REEL_RETURN_IF_ERROR(CheckAllReduce(c, count, ReduceOp::kSum, "sum"));
    REEL_RETURN_IF_ERROR(CheckAllReduce(c, count, ReduceOp::kMax, "max"));
    REEL_RETURN_IF_ERROR(CheckAllReduce(c, count, ReduceOp::kMin, "min"));
    // Every root for small sizes; for the big one the last rank, so the root is not rank 0.
    for (int root = count <= 1000 ? 0 : n - 1; root < n; ++root)
      REEL_RETURN_IF_ERROR(CheckBroadcast(c, count, root));
    REEL_RETURN_IF_ERROR(CheckAllGather(c, count));
    for (auto& a : arrived) {  // nobody leaves a barrier before everyone has arrived
      a.fetch_add(1);
      REEL_RETURN_IF_ERROR(c.Barrier(Far()));
      if (a.load() != n) return InternalError("left the barrier before every rank arrived");
    }
    return Status::Ok();
  });
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

}  // namespace
}  // namespace reel::core::conformance
