#include "interrupt.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace reel::cli {
namespace {

// Each case runs in a child process (a death test): the signals it raises and the dispositions
// it leaves behind stay there.

TEST(InterruptScopeDeathTest, TheFirstSignalIsAStopRequestTheSecondEndsTheProcess) {
  EXPECT_EXIT(
      {
        InterruptScope scope;
        std::raise(SIGTERM);
        if (!InterruptScope::Requested()) std::_Exit(3);
        std::fputs("asked to stop\n", stderr);
        std::raise(SIGINT);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGINT), "asked to stop");
}

// What `reel launch` does to the survivors of a failed rank: a SIGTERM that lands after the
// command's work ended, while it reports why it failed. The report still comes out whole.
TEST(InterruptScopeDeathTest, ASignalAfterTheScopeCannotCutTheFinalMessageOff) {
  EXPECT_EXIT(
      {
        { InterruptScope scope; }
        std::raise(SIGTERM);
        std::raise(SIGINT);
        std::fputs("reel train: UNAVAILABLE: rank 1 is unavailable\n", stderr);
        std::_Exit(1);
      },
      ::testing::ExitedWithCode(1), "reel train: UNAVAILABLE: rank 1 is unavailable");
}

TEST(InterruptScopeDeathTest, ANewScopeStartsWithoutTheOldRequest) {
  EXPECT_EXIT(
      {
        {
          InterruptScope first;
          std::raise(SIGINT);
        }
        InterruptScope second;
        std::_Exit(InterruptScope::Requested() ? 3 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Forming the group, opening data, `reel eval`: nothing polls, so the request cannot be honoured
// cleanly; the process ends with status 130 soon after instead of running on to its deadlines.
TEST(InterruptScopeDeathTest, ASignalThatNothingPollsEndsTheProcessWith130) {
  EXPECT_EXIT(
      {
        InterruptScope scope;
        std::raise(SIGTERM);
        // Far longer than kGrace: reaching the end means the watchdog did not act.
        std::this_thread::sleep_for(InterruptScope::kGrace * 30);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "interrupted where the work cannot stop cleanly");
}

// The training loop polls between steps: a request it has seen is its to finish (the step, then
// the checkpoint), however long that takes.
TEST(InterruptScopeDeathTest, WorkThatPollsOwnsTheStop) {
  EXPECT_EXIT(
      {
        InterruptScope scope;
        if (InterruptScope::Poll()) std::_Exit(3);
        std::raise(SIGINT);
        std::this_thread::sleep_for(InterruptScope::kGrace * 3);  // a long step
        if (!InterruptScope::Poll()) std::_Exit(4);
        std::fputs("checkpoint written\n", stderr);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "checkpoint written");
}

// Outside a scope (every command before its work, and commands without a scope such as eval and
// predict), either signal ends the process at once with status 130, as docs/training.md says.
TEST(ExitOnInterruptDeathTest, SigintExits130) {
  EXPECT_EXIT(
      {
        ExitOnInterrupt();
        std::raise(SIGINT);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "reel: interrupted \\(SIGINT\\)");
}

TEST(ExitOnInterruptDeathTest, SigtermExits130) {
  EXPECT_EXIT(
      {
        ExitOnInterrupt();
        std::raise(SIGTERM);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "reel: interrupted \\(SIGTERM\\)");
}

// A scope takes over: the first signal is a request again, not an exit.
TEST(ExitOnInterruptDeathTest, AScopeTurnsTheSignalIntoARequest) {
  EXPECT_EXIT(
      {
        ExitOnInterrupt();
        InterruptScope scope;
        std::raise(SIGTERM);
        std::_Exit(InterruptScope::Requested() ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace reel::cli
