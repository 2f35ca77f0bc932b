// The mpi transport, one rank per process: run as `mpirun -n N reel_mpi_tests` (N >= 2; CTest
// runs N = 2 and 3). Every process runs the same tests in the same order, because they talk.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "mpi_communicator.h"

namespace reel::mpi {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Long enough never to fire on a loaded machine; only tests that expect a timeout use short ones.
Deadline Far() { return DeadlineIn(60s); }

std::unique_ptr<Communicator> Join() {
  Result<std::unique_ptr<Communicator>> c =
      MpiCommunicator::Connect({kDiscover, kDiscover, ""}, Far());
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

std::vector<std::byte> Ints(std::initializer_list<int32_t> values) {
  std::vector<std::byte> out(values.size() * sizeof(int32_t));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}
int32_t Int(const std::vector<std::byte>& payload, size_t i) {
  int32_t v;
  std::memcpy(&v, payload.data() + i * sizeof v, sizeof v);
  return v;
}

TEST(MpiTransport, DiscoversRankAndSizeFromMpi) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(c->rank(), rank);
  EXPECT_EQ(c->size(), size);
  ASSERT_GE(size, 2) << "run under mpirun -n 2 or more";
  CommunicatorCapabilities caps = c->capabilities();
  EXPECT_TRUE(caps.native_allreduce && caps.native_broadcast && caps.native_allgather &&
              caps.native_barrier);
  // The host may name the rank and size too, as long as MPI agrees.
  auto named = MpiCommunicator::Connect({rank, size, ""}, Far());
  EXPECT_TRUE(named.ok()) << named.status();
}

TEST(MpiTransport, RefusesARankOrSizeThatDisagreesWithMpi) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int other = (rank + 1) % size;
  auto wrong_rank = MpiCommunicator::Connect({other, kDiscover, ""}, Far());
  EXPECT_EQ(wrong_rank.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_rank.status().message(), HasSubstr("rank " + std::to_string(other) +
                                                       ", MPI says rank " + std::to_string(rank)));
  auto wrong_size = MpiCommunicator::Connect({kDiscover, size + 1, ""}, Far());
  EXPECT_EQ(wrong_size.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_size.status().message(),
              HasSubstr(std::to_string(size + 1) + " ranks, MPI says " + std::to_string(size)));
}

TEST(MpiTransport, RefusesBadTagsAndRanks) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  for (int tag : {-1, kMaxTag + 1}) {
    Status s = c->Send(0, tag, Ints({1}), Far());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("tag " + std::to_string(tag)));
    EXPECT_EQ(c->Recv(0, tag, Far()).status().code(), StatusCode::kInvalidArgument);
  }
  Status s = c->Send(c->size(), 0, Ints({1}), Far());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rank " + std::to_string(c->size())));
  EXPECT_EQ(c->Recv(-5, 0, Far()).status().code(), StatusCode::kInvalidArgument);
  std::vector<std::byte> small(4), out(7);
  EXPECT_EQ(c->Broadcast(small, c->size(), Far()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->AllGather(small, out, Far()).code(), StatusCode::kInvalidArgument);
  // Refused calls sent nothing: the collectives are still in step.
  Status barrier = c->Barrier(Far());
  EXPECT_TRUE(barrier.ok()) << barrier;
}

TEST(MpiTransport, KeepsOrderPerSourceAndTagAcrossTheHighestTag) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  const int right = (c->rank() + 1) % c->size(), left = (c->rank() + c->size() - 1) % c->size();
  constexpr int kPerTag = 25;
  for (int i = 0; i < kPerTag; ++i)
    for (int tag : {1, kMaxTag}) {
      Status s = c->Send(right, tag, Ints({tag, i}), Far());
      ASSERT_TRUE(s.ok()) << s;
    }
  for (int tag : {kMaxTag, 1})  // the opposite order of sending: tags are independent queues
    for (int i = 0; i < kPerTag; ++i) {
      Result<Message> m = c->Recv(left, tag, Far());
      ASSERT_TRUE(m.ok()) << m.status();
      EXPECT_EQ(m->source, left);
      EXPECT_EQ(m->tag, tag);
      EXPECT_EQ(Int(m->payload, 0), tag);
      EXPECT_EQ(Int(m->payload, 1), i);
    }
}

TEST(MpiTransport, ReceivesFromAnySource) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  constexpr int kEach = 20;
  if (c->rank() != 0) {
    for (int i = 0; i < kEach; ++i) ASSERT_TRUE(c->Send(0, 3, Ints({c->rank(), i}), Far()).ok());
    return;
  }
  std::vector<int> next(static_cast<size_t>(c->size()), 0);
  for (int k = 0; k < (c->size() - 1) * kEach; ++k) {
    Result<Message> m = c->Recv(kAnySource, 3, Far());
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE(m->source >= 1 && m->source < c->size()) << m->source;
    EXPECT_EQ(Int(m->payload, 0), m->source);
    EXPECT_EQ(Int(m->payload, 1), next[m->source]++) << "rank " << m->source << " out of order";
  }
  for (int r = 1; r < c->size(); ++r) EXPECT_EQ(next[r], kEach);
}

// Send and Recv from two threads at once (MPI_THREAD_MULTIPLE), large messages straight into the
// caller's memory, empty ones, and RecvInto's size check.
TEST(MpiTransport, TwoThreadsCarryLargeAndEmptyMessagesAtOnce) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  const int right = (c->rank() + 1) % c->size(), left = (c->rank() + c->size() - 1) % c->size();
  auto pattern = [](int from, int tag, size_t bytes) {
    std::vector<std::byte> v(bytes);
    for (size_t i = 0; i < bytes; ++i)
      v[i] = static_cast<std::byte>((i * 131 + from * 7 + tag) & 0xff);
    return v;
  };
  std::vector<Status> sends(2);
  std::vector<std::thread> senders;
  for (int t = 0; t < 2; ++t)
    senders.emplace_back([&, t] {
      const int tag = 10 + t;
      sends[t] = c->Send(right, tag, pattern(c->rank(), tag, size_t{8} << 20), Far());
      if (sends[t].ok()) sends[t] = c->Send(right, tag, {}, Far());
    });
  for (int t = 0; t < 2; ++t) {
    const int tag = 10 + t;
    std::vector<std::byte> got(size_t{8} << 20);
    Status s = c->RecvInto(left, tag, got, Far());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(got == pattern(left, tag, got.size())) << "tag " << tag << " differs";
    Result<Message> empty = c->Recv(left, tag, Far());
    ASSERT_TRUE(empty.ok()) << empty.status();
    EXPECT_TRUE(empty->payload.empty());
  }
  for (auto& t : senders) t.join();
  for (const Status& s : sends) EXPECT_TRUE(s.ok()) << s;

  ASSERT_TRUE(c->Send(right, 12, Ints({1, 2, 3}), Far()).ok());
  std::vector<std::byte> wrong(8);
  Status s = c->RecvInto(left, 12, wrong, Far());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("has 12 bytes, expected 8"));
}

TEST(MpiTransport, PassedDeadlineNamesRankAndTagAndConsumesNothing) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  const int right = (c->rank() + 1) % c->size(), left = (c->rank() + c->size() - 1) % c->size();
  Result<Message> m = c->Recv(left, 7, DeadlineIn(20ms));
  EXPECT_EQ(m.status().code(), StatusCode::kDeadlineExceeded) << m.status();
  EXPECT_THAT(m.status().message(), HasSubstr("mpi rank " + std::to_string(c->rank())));
  EXPECT_THAT(m.status().message(), HasSubstr("rank " + std::to_string(left) + " tag 7"));
  std::vector<std::byte> into(4);
  Status any = c->RecvInto(kAnySource, 7, into, DeadlineIn(20ms));
  EXPECT_EQ(any.code(), StatusCode::kDeadlineExceeded) << any;
  EXPECT_THAT(any.message(), HasSubstr("any rank tag 7"));
  ASSERT_TRUE(c->Barrier(Far()).ok());  // nobody sent before everyone's timeout
  ASSERT_TRUE(c->Send(right, 7, Ints({42}), Far()).ok());
  Result<Message> late = c->Recv(left, 7, Far());
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(Int(late->payload, 0), 42);
}

// Multiples of 1/8 in [-125, 125]: sums over up to 8 ranks are exact in float, so results must
// match bit for bit whatever order MPI adds in.
float Value(int rank, size_t i) {
  return static_cast<float>(static_cast<int64_t>((rank * 7919 + i * 104729) % 2001) - 1000) / 8.0f;
}

void CheckCollectives(Communicator& c, size_t count) {
  SCOPED_TRACE(std::to_string(count) + " elements");
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    std::vector<float> data(count), want(count);
    for (size_t i = 0; i < count; ++i) {
      data[i] = Value(c.rank(), i);
      want[i] = Value(0, i);
      for (int r = 1; r < c.size(); ++r)
        want[i] = op == ReduceOp::kSum   ? want[i] + Value(r, i)
                  : op == ReduceOp::kMax ? std::max(want[i], Value(r, i))
                                         : std::min(want[i], Value(r, i));
    }
    ASSERT_TRUE(c.AllReduce(data, op, Far()).ok());
    EXPECT_TRUE(data == want) << "AllReduce op " << static_cast<int>(op);
  }
  for (int root = 0; root < c.size(); ++root) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = Value(c.rank(), i);
    ASSERT_TRUE(c.Broadcast(std::as_writable_bytes(std::span<float>(data)), root, Far()).ok());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], Value(root, i)) << "root " << root;
  }
  std::vector<float> in(count), out(count * static_cast<size_t>(c.size()), -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = Value(c.rank(), i);
  ASSERT_TRUE(c.AllGather(std::as_bytes(std::span<const float>(in)),
                          std::as_writable_bytes(std::span<float>(out)), Far())
                  .ok());
  for (int r = 0; r < c.size(); ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(out[static_cast<size_t>(r) * count + i], Value(r, i)) << "block " << r;
  ASSERT_TRUE(c.Barrier(Far()).ok());
}

TEST(MpiTransport, CollectivesMatchSequentialComputation) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  const size_t n = static_cast<size_t>(c->size());
  // Empty, one element, fewer elements than ranks, not divisible by the ranks, large.
  for (size_t count : {size_t{0}, size_t{1}, n - 1, 1000 * n + 1, size_t{1} << 20})
    CheckCollectives(*c, count);
}

TEST(MpiTransport, RanksDisagreeingAboutASizeAllGetAnErrorAndStayInStep) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  std::vector<float> data(c->rank() == 0 ? 10 : 12, 1.0f);
  Status s = c->AllReduce(data, ReduceOp::kSum, Far());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("same size"));
  EXPECT_THAT(s.message(), HasSubstr("between 10 and 12"));
  std::vector<std::byte> bytes(4);
  Status root = c->Broadcast(bytes, c->rank() == 0 ? 0 : 1, Far());
  EXPECT_EQ(root.code(), StatusCode::kInvalidArgument) << root;
  EXPECT_THAT(root.message(), HasSubstr("same root"));
  CheckCollectives(*c, 5);
}

// A Barrier that times out on one rank: the others complete it when they arrive, and then the
// timed-out rank's collectives work again (a Barrier has no data phase to be stuck in).
TEST(MpiTransport, BarrierPastItsDeadlineRecoversWhenTheOthersArrive) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  if (c->rank() == 0) {
    Status s = c->Barrier(DeadlineIn(50ms));
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(s.message(), HasSubstr("mpi rank 0: Barrier"));
    std::vector<float> data(3, 1.0f);
    Status refused = c->AllReduce(data, ReduceOp::kSum, Far());
    EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused;
    EXPECT_THAT(refused.message(), HasSubstr("Barrier failed"));
    for (int r = 1; r < c->size(); ++r) ASSERT_TRUE(c->Send(r, 1, {}, Far()).ok());
    for (int r = 1; r < c->size(); ++r) ASSERT_TRUE(c->Recv(r, 2, Far()).ok());  // they arrived
  } else {
    ASSERT_TRUE(c->Recv(0, 1, Far()).ok());  // rank 0 has given up
    ASSERT_TRUE(c->Barrier(Far()).ok());
    ASSERT_TRUE(c->Send(0, 2, {}, Far()).ok());
  }
  CheckCollectives(*c, 7);
}

// The last rank leaves: what it sent first is still delivered, then receives, sends and
// collectives that need it report it as Unavailable instead of waiting for the deadline.
TEST(MpiTransport, PeerThatLeftIsUnavailableNotAHang) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  const int last = c->size() - 1;
  if (c->rank() == last) {
    for (int r = 0; r < last; ++r) ASSERT_TRUE(c->Send(r, 9, Ints({7}), Far()).ok());
    c.reset();
    return;
  }
  Result<Message> before = c->Recv(last, 9, Far());
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(Int(before->payload, 0), 7);
  Result<Message> after = c->Recv(last, 9, Far());
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable) << after.status();
  EXPECT_THAT(after.status().message(), HasSubstr("rank " + std::to_string(last) + " has left"));
  Status send = c->Send(last, 9, Ints({1}), Far());
  EXPECT_EQ(send.code(), StatusCode::kUnavailable) << send;
  Status barrier = c->Barrier(Far());
  EXPECT_EQ(barrier.code(), StatusCode::kUnavailable) << barrier;
  // Names every rank known to have left: the last, and maybe others that finished this test.
  EXPECT_THAT(barrier.message(),
              ::testing::MatchesRegex(".*ranks? ([0-9]+, )*" + std::to_string(last) + " ha.*"));
}

TEST(MpiTransport, LeavingWakesAWaitingReceiver) {
  auto c = Join();
  ASSERT_NE(c, nullptr);
  if (c->rank() == 1) {
    std::this_thread::sleep_for(20ms);  // let rank 0 block first (either order must work)
    c.reset();
    return;
  }
  if (c->rank() != 0) return;
  Result<Message> m = c->Recv(1, 10, Far());
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable) << m.status();
  EXPECT_THAT(m.status().message(), HasSubstr("rank 1 has left"));
}

}  // namespace
}  // namespace reel::mpi
