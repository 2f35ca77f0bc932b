// The choice of how AllReduce waits (allreduce_waiting.h): the option when given, else Open MPI's
// rule (poll while the group's ranks on this host fit the cores, sleep when they do not); a given
// spin yields the core between polls when they do not.
#include "allreduce_waiting.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace reel::tcp {
namespace {

using std::chrono::microseconds;
using ::testing::HasSubstr;

TEST(AllReduceWaiting, AutomaticPollsWhileTheHostsRanksFitItsCores) {
  for (const auto& [ranks, cores] : {std::pair{1, 1}, {2, 2}, {2, 4}, {4, 4}, {3, 64}}) {
    const AllReduceWaiting w = ChooseAllReduceWaiting(std::nullopt, ranks, cores);
    EXPECT_EQ(w.spin, kAutomaticSpin) << ranks << " ranks, " << cores << " cores";
    EXPECT_FALSE(w.yield) << ranks << " ranks, " << cores << " cores";
    EXPECT_THAT(w.why, HasSubstr("waits by polling (for up to 20000 us"));
    EXPECT_THAT(w.why, HasSubstr("automatic: " + std::to_string(ranks) +
                                 " rank(s) of the group on this host, " + std::to_string(cores) +
                                 " core(s) for this rank"));
  }
}

TEST(AllReduceWaiting, AutomaticSleepsWhenTheHostIsOversubscribed) {
  for (const auto& [ranks, cores] : {std::pair{3, 2}, {2, 1}, {65, 64}}) {
    const AllReduceWaiting w = ChooseAllReduceWaiting(std::nullopt, ranks, cores);
    EXPECT_EQ(w.spin, microseconds(0)) << ranks << " ranks, " << cores << " cores";
    EXPECT_FALSE(w.yield) << ranks << " ranks, " << cores << " cores";
    EXPECT_THAT(w.why, HasSubstr("waits by sleeping (automatic: " + std::to_string(ranks) +
                                 " rank(s) of the group on this host, " + std::to_string(cores) +
                                 " core(s)"));
  }
}

TEST(AllReduceWaiting, TheOptionOverridesTheRuleEitherWay) {
  for (const auto& [ranks, cores] : {std::pair{1, 8}, {3, 2}}) {
    const AllReduceWaiting never = ChooseAllReduceWaiting(microseconds(0), ranks, cores);
    EXPECT_EQ(never.spin, microseconds(0));
    EXPECT_FALSE(never.yield);
    EXPECT_THAT(never.why, HasSubstr("waits by sleeping (allreduce_spin_us=0)"));
  }
  // A given spin still yields where the host's ranks outnumber the cores.
  const AllReduceWaiting fixed = ChooseAllReduceWaiting(microseconds(500), 2, 2);
  EXPECT_EQ(fixed.spin, microseconds(500));
  EXPECT_FALSE(fixed.yield);
  EXPECT_THAT(fixed.why, HasSubstr("waits by polling (for up to 500 us"));
  EXPECT_THAT(fixed.why, HasSubstr("(allreduce_spin_us=500)"));
  const AllReduceWaiting shared = ChooseAllReduceWaiting(microseconds(500), 3, 2);
  EXPECT_EQ(shared.spin, microseconds(500));
  EXPECT_TRUE(shared.yield);
  EXPECT_THAT(shared.why, HasSubstr("waits by polling and yielding its core (for up to 500 us"));
}

TEST(AllReduceWaiting, TheMachineIdIsStableAndFitsTheRendezvous) {
  const std::string id = MachineId();
  EXPECT_EQ(MachineId(), id);
  ASSERT_FALSE(id.empty());
  EXPECT_LE(id.size(), 255u);
  for (char c : id) EXPECT_TRUE(c > ' ' && c <= '~') << id;
}

// Beside the rank's own compute (the sync optimizer's buckets during backward) an automatic
// polling wait sleeps instead; a polling the option asked for stays.
TEST(AllReduceWaiting, ComputeAlongsideSleepsUnlessTheOptionAskedToPoll) {
  const AllReduceWaiting automatic = ChooseAllReduceWaiting(std::nullopt, 2, 2);
  ASSERT_EQ(automatic.spin, kAutomaticSpin);
  EXPECT_EQ(SpinNow(automatic, /*option_given=*/false, /*compute_alongside=*/false),
            kAutomaticSpin);
  EXPECT_EQ(SpinNow(automatic, false, true), microseconds(0));
  const AllReduceWaiting given = ChooseAllReduceWaiting(microseconds(500), 2, 2);
  EXPECT_EQ(SpinNow(given, true, true), microseconds(500));
  EXPECT_EQ(SpinNow(given, true, false), microseconds(500));
}

}  // namespace
}  // namespace reel::tcp
