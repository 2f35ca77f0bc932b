// The conformance suite's collective cases: AllReduce (sum, max, min), Broadcast from every root,
// AllGather, ReduceScatter (sum, max), AllGatherShards and Barrier against a sequential
// computation, at 0, 1, fewer-than-ranks, not-divisible and large element counts; arguments every
// rank passes but none may; and deadlines when a rank stays away. Arguments that disagree:
// collective_argument_tests.cc.
#include <gmock/gmock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>

#include "harness.h"
#include "reel/shard_layout.h"

namespace reel::conformance {

int CollectiveTestsLinked() { return 1; }

namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

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

// This rank's shard must hold the reduction; the rest of the buffer is unspecified.
Status CheckReduceScatter(Communicator& c, size_t count, ReduceOp op, const char* name) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = Value(c.rank(), i);
  REEL_RETURN_IF_ERROR(c.ReduceScatter(data, op, Far()));
  const ShardRange mine =
      ShardOf(count, static_cast<size_t>(c.size()), static_cast<size_t>(c.rank()));
  for (size_t i = mine.offset; i < mine.offset + mine.length; ++i) {
    float want = Value(0, i);
    for (int r = 1; r < c.size(); ++r)
      want = op == ReduceOp::kSum ? want + Value(r, i) : std::max(want, Value(r, i));
    if (data[i] != want)
      return InternalError(std::string("ReduceScatter ") + name + " index " + std::to_string(i) +
                           " of shard [" + std::to_string(mine.offset) + ", +" +
                           std::to_string(mine.length) + "): got " + std::to_string(data[i]) +
                           ", want " + std::to_string(want));
  }
  return Status::Ok();
}

// Each rank fills only its own shard (the rest is garbage of its own); afterwards all hold all.
Status CheckAllGatherShards(Communicator& c, size_t count) {
  const size_t n = static_cast<size_t>(c.size());
  std::vector<float> data(count, -1.0f - static_cast<float>(c.rank()));
  const ShardRange mine = ShardOf(count, n, static_cast<size_t>(c.rank()));
  for (size_t i = mine.offset; i < mine.offset + mine.length; ++i) data[i] = Value(c.rank(), i);
  REEL_RETURN_IF_ERROR(c.AllGatherShards(data, Far()));
  for (size_t r = 0; r < n; ++r) {
    const ShardRange shard = ShardOf(count, n, r);
    for (size_t i = shard.offset; i < shard.offset + shard.length; ++i)
      if (data[i] != Value(static_cast<int>(r), i))
        return InternalError("AllGatherShards shard " + std::to_string(r) + " index " +
                             std::to_string(i) + ": got " + std::to_string(data[i]));
  }
  return Status::Ok();
}

TEST_P(CollectiveConformance, MatchSequentialComputation) {
  // Not a structured binding: a lambda below uses count_kind, and C++20 lets no lambda capture
  // a binding (clang 14 refuses).
  const TransportUnderTest& transport = std::get<0>(GetParam());
  const int threads = std::get<1>(GetParam());
  const Count count_kind = std::get<2>(GetParam());
  const bool as_threads = transport.placement == Placement::kThreads;
  // Ranks as threads also check that nobody leaves a barrier before everyone has arrived.
  std::vector<std::atomic<int>> arrived(3);
  RunAndReport(
      transport, threads, 1,
      [&](Communicator& c) -> Status {
        const int n = c.size();
        const size_t count = Elements(count_kind, n);
        REEL_RETURN_IF_ERROR(CheckAllReduce(c, count, ReduceOp::kSum, "sum"));
        REEL_RETURN_IF_ERROR(CheckAllReduce(c, count, ReduceOp::kMax, "max"));
        REEL_RETURN_IF_ERROR(CheckAllReduce(c, count, ReduceOp::kMin, "min"));
        // Every root for small sizes; for the large one the last rank, so the root is not rank 0.
        for (int root = count_kind == Count::kLarge ? n - 1 : 0; root < n; ++root)
          REEL_RETURN_IF_ERROR(CheckBroadcast(c, count, root));
        REEL_RETURN_IF_ERROR(CheckAllGather(c, count));
        REEL_RETURN_IF_ERROR(CheckReduceScatter(c, count, ReduceOp::kSum, "sum"));
        REEL_RETURN_IF_ERROR(CheckReduceScatter(c, count, ReduceOp::kMax, "max"));
        REEL_RETURN_IF_ERROR(CheckAllGatherShards(c, count));
        for (auto& a : arrived) {
          a.fetch_add(1);
          REEL_RETURN_IF_ERROR(c.Barrier(Far()));
          if (as_threads && a.load() != n)
            return InternalError("left the barrier before every rank arrived");
        }
        return Status::Ok();
      },
      Layer::kWithCollectives);
}

// What the sync optimizer does with its gradient buckets (docs/distributed.md, "Overlapping the
// exchange with backward"): a thread of its own sums consecutive pieces of one buffer, the last
// first, one call at a time while the thread that connected waits; then that thread takes the
// collectives back, in step on every rank.
TEST_P(CollectiveConformance, AllReduceOfPiecesOnAnotherThread) {
  const Count count_kind = std::get<2>(GetParam());
  RunAndReport(
      std::get<0>(GetParam()), std::get<1>(GetParam()), 1,
      [&](Communicator& c) -> Status {
        const size_t count = Elements(count_kind, c.size());
        std::vector<float> data(count), want(count);
        for (size_t i = 0; i < count; ++i) {
          data[i] = Value(c.rank(), i);
          want[i] = Value(0, i);
          for (int r = 1; r < c.size(); ++r) want[i] += Value(r, i);
        }
        Status on_thread;
        std::thread reducer([&] {
          const size_t piece = std::max<size_t>(1, count / 3);
          for (size_t end = count; end > 0 && on_thread.ok();) {
            const size_t begin = end > piece ? end - piece : 0;
            on_thread = c.AllReduce(std::span<float>(data).subspan(begin, end - begin),
                                    ReduceOp::kSum, Far());
            end = begin;
          }
        });
        reducer.join();
        REEL_RETURN_IF_ERROR(on_thread.WithContext("the reducing thread"));
        for (size_t i = 0; i < count; ++i)
          if (data[i] != want[i])
            return InternalError("pieces reduced on another thread: index " + std::to_string(i) +
                                 ": got " + std::to_string(data[i]) + ", want " +
                                 std::to_string(want[i]));
        return CheckAllReduce(c, count, ReduceOp::kMax, "max, back on the rank's thread");
      },
      Layer::kWithCollectives);
}

// Arguments that every rank passes alike but none may: InvalidArgument on every rank, and the
// ranks stay in step (the AllReduce after them works).
TEST_P(TransportConformance, CollectiveArgumentErrorsAreReported) {
  OnRanks(2, 2, [&](Communicator& c) -> Status {
    std::vector<std::byte> small(4), out(4 * static_cast<size_t>(c.size()) + 3);
    Status bad_root = c.Broadcast(small, c.size(), Far());
    if (bad_root.code() != StatusCode::kInvalidArgument)
      return InternalError("Broadcast from root size(): " + bad_root.ToString());
    Status gather = c.AllGather(small, out, Far());
    if (gather.code() != StatusCode::kInvalidArgument)
      return InternalError("AllGather into a wrong-sized output: " + gather.ToString());
    std::vector<float> data(10, 1.0f);
    REEL_RETURN_IF_ERROR(c.AllReduce(data, ReduceOp::kSum, Far()).WithContext("after them"));
    if (data[0] != static_cast<float>(c.size()))
      return InternalError("AllReduce after the refused calls: got " + std::to_string(data[0]));
    return Status::Ok();
  });
}

// A collective some ranks never join ends at its deadline on the ranks that did, instead of
// waiting for ever. (After it the collectives are refused: the Barrier runs in a group of its
// own.)
TEST_P(TransportConformance, CollectivePastItsDeadlineWhenARankStaysAway) {
  Communicators comms = ThreadsOnly(3, "rank 2 stays out of a collective");
  Communicators for_barrier = ThreadsOnly(3, "rank 2 stays out of a collective");
  if (comms.empty() || for_barrier.empty()) return;
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    if (c.rank() == 2) return Status::Ok();
    std::vector<float> data(1000, 1.0f);
    return c.AllReduce(data, ReduceOp::kSum, DeadlineIn(200ms));
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(st[static_cast<size_t>(r)].code(), StatusCode::kDeadlineExceeded)
        << "rank " << r << ": " << st[static_cast<size_t>(r)];
  }
  Status barrier = for_barrier[0]->Barrier(DeadlineIn(200ms));
  EXPECT_EQ(barrier.code(), StatusCode::kDeadlineExceeded) << barrier;
  EXPECT_THAT(barrier.message(), HasSubstr("Barrier"));
}

}  // namespace
}  // namespace reel::conformance
