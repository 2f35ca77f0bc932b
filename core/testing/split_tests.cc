// The conformance suite's sub-group cases (Communicator::Split): membership and order by
// (color, key), collectives within each sub-group, and sub-group messages that never match the
// parent's on the same tag.
#include <gmock/gmock.h>

#include <cstring>

#include "harness.h"

namespace reel::conformance {

int SplitTestsLinked() { return 1; }

namespace {

// Colors by parity, keys reversed: the sub-group ranks run opposite to the parent's.
TEST_P(TransportConformance, SplitGroupsByColorAndOrdersByKey) {
  OnRanks(4, 2, [&](Communicator& c) -> Status {
    const int color = c.rank() % 2, key = -c.rank();
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub, c.Split(color, key, Far()));
    int members = 0, before_me = 0;
    for (int r = 0; r < c.size(); ++r) {
      if (r % 2 != color) continue;
      ++members;
      if (r > c.rank()) ++before_me;  // a larger parent rank has a smaller key
    }
    if (sub->size() != members || sub->rank() != before_me)
      return InternalError("sub-group rank " + std::to_string(sub->rank()) + " of " +
                           std::to_string(sub->size()) + ", expected " + std::to_string(before_me) +
                           " of " + std::to_string(members));
    // Each sub-group sums its parent ranks: only its own members contribute.
    float sum[1] = {static_cast<float>(c.rank())};
    REEL_RETURN_IF_ERROR(sub->AllReduce(sum, ReduceOp::kSum, Far()));
    float want = 0;
    for (int r = color; r < c.size(); r += 2) want += static_cast<float>(r);
    if (sum[0] != want)
      return InternalError("color " + std::to_string(color) + ": AllReduce gave " +
                           std::to_string(sum[0]) + ", expected " + std::to_string(want));
    // Sub-group rank 0 broadcasts its parent rank.
    int32_t root_parent = c.rank();
    REEL_RETURN_IF_ERROR(
        sub->Broadcast(std::as_writable_bytes(std::span<int32_t>(&root_parent, 1)), 0, Far()));
    const int expected_root = (c.size() - 1 - color) / 2 * 2 + color;  // largest of the color
    if (root_parent != expected_root)
      return InternalError("color " + std::to_string(color) + ": broadcast root is parent rank " +
                           std::to_string(root_parent) + ", expected " +
                           std::to_string(expected_root));
    return sub->Barrier(Far());
  });
}

// Parent ranks 0 and 1 form one sub-group in reverse order. The same user tag in the parent and
// in the sub-group are separate queues, whichever is sent first, and an any-source receive in the
// sub-group names the sender by its sub-group rank.
TEST_P(TransportConformance, SplitMessagesNeverMatchTheParents) {
  OnRanks(2, 2, [&](Communicator& c) -> Status {
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                          c.Split(c.rank() < 2 ? 0 : 1, -c.rank(), Far()));
    if (c.rank() >= 2) return Status::Ok();
    constexpr int kTag = 5;
    if (c.rank() == 0) {
      const int32_t parent_msg = 111, sub_msg = 222;
      REEL_RETURN_IF_ERROR(
          c.Send(1, kTag, std::as_bytes(std::span<const int32_t>(&parent_msg, 1)), Far()));
      // Parent rank 1 is sub-group rank 0.
      return sub->Send(0, kTag, std::as_bytes(std::span<const int32_t>(&sub_msg, 1)), Far());
    }
    REEL_ASSIGN_OR_RETURN(Message m, sub->Recv(kAnySource, kTag, Far()));
    int32_t got_sub = 0, got_parent = 0;
    if (m.payload.size() == sizeof got_sub) std::memcpy(&got_sub, m.payload.data(), sizeof got_sub);
    REEL_RETURN_IF_ERROR(
        c.RecvInto(0, kTag, std::as_writable_bytes(std::span<int32_t>(&got_parent, 1)), Far()));
    if (got_sub != 222 || m.source != 1 || got_parent != 111)
      return InternalError("sub-group got " + std::to_string(got_sub) + " from sub-group rank " +
                           std::to_string(m.source) + " (expected 222 from 1), parent got " +
                           std::to_string(got_parent) + " (expected 111)");
    return Status::Ok();
  });
}

TEST_P(TransportConformance, SplitRefusesANegativeColor) {
  OnRanks(1, 1, [&](Communicator& c) -> Status {
    Result<std::unique_ptr<Communicator>> sub = c.Split(-1, 0, Far());
    if (sub.status().code() != StatusCode::kInvalidArgument)
      return InternalError("Split(-1) gave " + sub.status().ToString());
    return Status::Ok();
  });
}

}  // namespace
}  // namespace reel::conformance
