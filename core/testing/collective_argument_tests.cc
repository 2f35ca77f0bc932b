// The conformance suite's cases for collectives whose arguments disagree and for a communicator
// after a failed collective (reel/transport.h): ranks that disagree about a size, an operation,
// a root, or an empty buffer among full ones all get InvalidArgument, with their data as it was
// and the communicator still usable; after any other failure every later collective is
// FailedPrecondition while point-to-point works. Native collectives are held to it too.
#include <gmock/gmock.h>

#include <chrono>
#include <functional>
#include <vector>

#include "harness.h"

namespace reel::conformance {

int CollectiveArgumentTestsLinked() { return 1; }

namespace {

using namespace std::chrono_literals;

// Values no collective of these tests could produce from them by accident.
std::vector<std::byte> Bytes(size_t n, int rank) {
  std::vector<std::byte> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>(rank * 31 + static_cast<int>(i) + 1);
  return b;
}

// After a refused collective the group must still be in step: an AllReduce that every rank
// passes alike works.
Status StillInStep(Communicator& c, const std::string& after) {
  std::vector<float> v{static_cast<float>(c.rank() + 1)};
  REEL_RETURN_IF_ERROR(
      c.AllReduce(v, ReduceOp::kSum, Far()).WithContext("AllReduce after " + after));
  const float want = static_cast<float>(c.size() * (c.size() + 1) / 2);
  if (v[0] != want)
    return InternalError("AllReduce after " + after + ": got " + std::to_string(v[0]) + ", want " +
                         std::to_string(want));
  return Status::Ok();
}

// `call` must fail with InvalidArgument, leave `data` equal to `before`, and the group in step.
template <typename T>
Status ExpectRefused(Communicator& c, const std::string& what, const std::vector<T>& data,
                     const std::vector<T>& before, const std::function<Status()>& call) {
  Status s = call();
  if (s.code() != StatusCode::kInvalidArgument)
    return InternalError(what + ": want InvalidArgument on every rank, got " + s.ToString());
  if (data != before) return InternalError(what + ": the refused call changed this rank's data");
  return StillInStep(c, what);
}

Status CheckAllReduceDisagreement(Communicator& c, const std::string& what, size_t count,
                                  ReduceOp op) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(c.rank() * 100 + i) + 0.5f;
  const std::vector<float> before = data;
  return ExpectRefused(c, what, data, before, [&] { return c.AllReduce(data, op, Far()); });
}

TEST_P(TransportConformance, AllReduceArgumentsThatDisagreeFailOnEveryRank) {
  OnRanks(3, 2, [&](Communicator& c) -> Status {
    const bool first = c.rank() == 0, last = c.rank() == c.size() - 1;
    const size_t r = static_cast<size_t>(c.rank());
    REEL_RETURN_IF_ERROR(CheckAllReduceDisagreement(c, "AllReduce, rank 0 empty, the others 10",
                                                    first ? 0 : 10, ReduceOp::kSum));
    REEL_RETURN_IF_ERROR(CheckAllReduceDisagreement(
        c, "AllReduce, the last rank empty, the others 1000", last ? 0 : 1000, ReduceOp::kSum));
    // Each rank's own size, so no rank's ring neighbour agrees with it (10, 12, 14, ...).
    REEL_RETURN_IF_ERROR(CheckAllReduceDisagreement(c, "AllReduce, each rank another size",
                                                    10 + 2 * r, ReduceOp::kSum));
    // Only the last rank differs: its left neighbour agrees with the rank before it.
    REEL_RETURN_IF_ERROR(CheckAllReduceDisagreement(c, "AllReduce, the last rank 11, the others 10",
                                                    last ? 11 : 10, ReduceOp::kSum));
    REEL_RETURN_IF_ERROR(CheckAllReduceDisagreement(c, "AllReduce, rank 0 max, the others sum", 10,
                                                    first ? ReduceOp::kMax : ReduceOp::kSum));
    // 100 KiB against 200 KiB: sizes on both sides of 128 KiB, where a backend may switch
    // algorithms (mpi does); the ranks must still meet and all refuse.
    REEL_RETURN_IF_ERROR(CheckAllReduceDisagreement(
        c, "AllReduce, rank 0 100 KiB, the others 200 KiB", first ? 25600 : 51200, ReduceOp::kSum));
    REEL_RETURN_IF_ERROR(CheckAllReduceDisagreement(
        c, "AllReduce, rank 0 200 KiB, the others 100 KiB", first ? 51200 : 25600, ReduceOp::kSum));
    return Status::Ok();
  });
}

Status CheckBroadcastDisagreement(Communicator& c, const std::string& what, size_t bytes,
                                  int root) {
  std::vector<std::byte> data = Bytes(bytes, c.rank());
  const std::vector<std::byte> before = data;
  return ExpectRefused(c, what, data, before, [&] { return c.Broadcast(data, root, Far()); });
}

TEST_P(TransportConformance, BroadcastArgumentsThatDisagreeFailOnEveryRank) {
  OnRanks(3, 2, [&](Communicator& c) -> Status {
    const bool first = c.rank() == 0;
    REEL_RETURN_IF_ERROR(CheckBroadcastDisagreement(
        c, "Broadcast, rank 0 from root 0, the others from 1", 64, first ? 0 : 1));
    REEL_RETURN_IF_ERROR(CheckBroadcastDisagreement(
        c, "Broadcast, rank 0 from a root outside the group, the others from 0", 64,
        first ? c.size() : 0));
    REEL_RETURN_IF_ERROR(CheckBroadcastDisagreement(c, "Broadcast, each rank another size",
                                                    8 + static_cast<size_t>(c.rank()), 0));
    REEL_RETURN_IF_ERROR(CheckBroadcastDisagreement(c, "Broadcast, rank 1 empty, the others 64",
                                                    c.rank() == 1 ? 0 : 64, 0));
    return Status::Ok();
  });
}

Status CheckAllGatherDisagreement(Communicator& c, const std::string& what, size_t bytes,
                                  size_t out_bytes) {
  const std::vector<std::byte> in = Bytes(bytes, c.rank());
  std::vector<std::byte> out(out_bytes, std::byte{0x5a});
  const std::vector<std::byte> before = out;
  return ExpectRefused(c, what, out, before, [&] { return c.AllGather(in, out, Far()); });
}

TEST_P(TransportConformance, AllGatherArgumentsThatDisagreeFailOnEveryRank) {
  OnRanks(3, 2, [&](Communicator& c) -> Status {
    const size_t n = static_cast<size_t>(c.size()), r = static_cast<size_t>(c.rank());
    REEL_RETURN_IF_ERROR(
        CheckAllGatherDisagreement(c, "AllGather, each rank another size", 4 + r, n * (4 + r)));
    REEL_RETURN_IF_ERROR(CheckAllGatherDisagreement(
        c, "AllGather, rank 0's output too small, the others' right", 8, r == 0 ? 8 : 8 * n));
    REEL_RETURN_IF_ERROR(CheckAllGatherDisagreement(c, "AllGather, rank 0 empty, the others 8",
                                                    r == 0 ? 0 : 8, r == 0 ? 0 : 8 * n));
    return Status::Ok();
  });
}

Status CheckShardedDisagreement(Communicator& c, const std::string& what, size_t count, bool gather,
                                ReduceOp op = ReduceOp::kSum) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(c.rank() * 100 + i) + 0.5f;
  const std::vector<float> before = data;
  return ExpectRefused(c, what, data, before, [&] {
    return gather ? c.AllGatherShards(data, Far()) : c.ReduceScatter(data, op, Far());
  });
}

TEST_P(TransportConformance, ShardedCollectiveArgumentsThatDisagreeFailOnEveryRank) {
  OnRanks(3, 2, [&](Communicator& c) -> Status {
    const bool first = c.rank() == 0, last = c.rank() == c.size() - 1;
    const size_t r = static_cast<size_t>(c.rank());
    REEL_RETURN_IF_ERROR(CheckShardedDisagreement(c, "ReduceScatter, each rank another size",
                                                  10 + r, /*gather=*/false));
    REEL_RETURN_IF_ERROR(CheckShardedDisagreement(c, "ReduceScatter, rank 0 empty, the others 100",
                                                  first ? 0 : 100, /*gather=*/false));
    REEL_RETURN_IF_ERROR(CheckShardedDisagreement(c, "ReduceScatter, rank 0 max, the others sum",
                                                  100, /*gather=*/false,
                                                  first ? ReduceOp::kMax : ReduceOp::kSum));
    REEL_RETURN_IF_ERROR(
        CheckShardedDisagreement(c, "AllGatherShards, the last rank 101, the others 100",
                                 last ? 101 : 100, /*gather=*/true));
    REEL_RETURN_IF_ERROR(CheckShardedDisagreement(
        c, "AllGatherShards, rank 0 empty, the others 100", first ? 0 : 100, /*gather=*/true));
    // One half against the other, of the same size (both run by one implementation, the host's
    // ring or the backend's own: a backend's native AllReduce need not meet them).
    std::vector<float> data(100, 1.0f);
    const std::vector<float> before = data;
    return ExpectRefused(c, "ReduceScatter on rank 0, AllGatherShards on the others", data, before,
                         [&] {
                           return first ? c.ReduceScatter(data, ReduceOp::kSum, Far())
                                        : c.AllGatherShards(data, Far());
                         });
  });
}

// A collective that fails other than by InvalidArgument leaves the collectives refused for good,
// at once, whatever the deadline; point-to-point between the ranks still works.
TEST_P(TransportConformance, AfterAFailedCollectiveEveryCollectiveIsRefused) {
  Communicators comms = ThreadsOnly(3, "rank 2 stays out of a collective");
  if (comms.empty()) return;
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    if (c.rank() == 2) return Status::Ok();
    std::vector<float> data(1000, 1.0f);
    Status failed = c.AllReduce(data, ReduceOp::kSum, DeadlineIn(200ms));
    if (failed.code() != StatusCode::kDeadlineExceeded)
      return InternalError("the AllReduce without rank 2: " + failed.ToString());
    // Long enough that waiting instead of refusing shows as DeadlineExceeded, not a hang.
    const Deadline later = DeadlineIn(5s);
    std::vector<std::byte> bytes(16), gathered(16 * 3);
    const std::vector<std::pair<const char*, std::function<Status()>>> calls = {
        {"AllReduce", [&] { return c.AllReduce(data, ReduceOp::kSum, later); }},
        {"empty AllReduce", [&] { return c.AllReduce({}, ReduceOp::kSum, later); }},
        {"Broadcast", [&] { return c.Broadcast(bytes, 0, later); }},
        {"AllGather", [&] { return c.AllGather(bytes, gathered, later); }},
        {"ReduceScatter", [&] { return c.ReduceScatter(data, ReduceOp::kSum, later); }},
        {"AllGatherShards", [&] { return c.AllGatherShards(data, later); }},
        {"Barrier", [&] { return c.Barrier(later); }}};
    for (const auto& [name, call] : calls) {
      Status s = call();
      if (s.code() != StatusCode::kFailedPrecondition)
        return InternalError(std::string(name) +
                             " after a failed AllReduce: want "
                             "FailedPrecondition, got " +
                             s.ToString());
    }
    const std::vector<std::byte> hello = Bytes(8, c.rank());
    REEL_RETURN_IF_ERROR(c.Send(1 - c.rank(), 3, hello, Far()));
    REEL_ASSIGN_OR_RETURN(Message m, c.Recv(1 - c.rank(), 3, Far()));
    if (m.payload != Bytes(8, 1 - c.rank()))
      return InternalError("point-to-point after a failed collective: wrong bytes");
    return Status::Ok();
  });
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

}  // namespace
}  // namespace reel::conformance
