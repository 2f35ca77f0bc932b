// The mailbox's verdicts on peers, without sockets.
#include "mailbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace reel::tcp {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Rank 2 fails; rank 1, whose own call failed because of it, leaves. A send to rank 1 must name
// rank 2 (the cause), as a receive does: under `reel launch` the ranks a failure leaves behind
// exit one after the other, and the last one's error named only the rank that left before it.
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

}  // namespace
}  // namespace reel::tcp
