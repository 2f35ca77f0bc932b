#include "interrupt.h"

#include <gtest/gtest.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace reel::cli {
namespace {

// Each case runs in a child process (a death test): the signals it sends and the state it leaves
// behind stay there. Signals go to the process, as kill, Slurm and a terminal send them; the
// watcher thread takes them, so each case waits (boundedly) for what it expects.

void SignalProcess(int sig) { ::kill(::getpid(), sig); }

bool WaitForRequest() {
  for (int i = 0; i < 2000 && !InterruptScope::Requested(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return InterruptScope::Requested();
}

// Slurm's preemption, scancel and time limit TERM every task, and the sbatch examples' traps
// forward another TERM: the second and third signals, sent as kill sends them, must not cut the
// step or the checkpoint short.
TEST(InterruptScopeDeathTest, SignalsAfterTheFirstDoNotEndWorkThatIsStopping) {
  EXPECT_EXIT(
      {
        InterruptScope scope;
        if (InterruptScope::Poll()) std::_Exit(3);
        SignalProcess(SIGTERM);
        if (!WaitForRequest()) std::_Exit(4);
        SignalProcess(SIGTERM);
        SignalProcess(SIGINT);  // kill's SIGINT, not a terminal's
        SignalProcess(SIGTERM);
        std::this_thread::sleep_for(InterruptScope::kGrace * 2);  // the checkpoint being written
        if (!InterruptScope::Poll()) std::_Exit(5);
        std::fputs("checkpoint written\n", stderr);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "already stopping(.|\n)*checkpoint written");
}

// A second Ctrl-C typed on a terminal ends the process at once, as Python users expect. The
// child makes a pseudo-terminal its controlling terminal, so the kernel's line discipline sends
// the SIGINTs as a terminal does (si_code SI_KERNEL).
TEST(InterruptScopeDeathTest, ASecondCtrlCOnATerminalEndsTheProcessAtOnce) {
  EXPECT_EXIT(
      {
        int terminal = -1;
        int process_side = -1;
        if (::setsid() < 0 || ::openpty(&terminal, &process_side, nullptr, nullptr, nullptr) != 0 ||
            ::ioctl(process_side, TIOCSCTTY, 0) != 0)
          std::_Exit(3);
        InterruptScope scope;
        if (InterruptScope::Poll()) std::_Exit(4);
        const char ctrl_c = 0x03;
        if (::write(terminal, &ctrl_c, 1) != 1) std::_Exit(5);
        if (!WaitForRequest()) std::_Exit(6);
        std::fputs("stopping\n", stderr);
        if (::write(terminal, &ctrl_c, 1) != 1) std::_Exit(7);
        std::this_thread::sleep_for(InterruptScope::kGrace * 5);  // still writing the checkpoint
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "stopping(.|\n)*interrupted again from the terminal");
}

// The signals never interrupt the threads that compute (oneDNN's JIT GEMM kernels point the
// stack pointer into the heap: a signal frame there corrupts it; interrupt.h). Threads started
// after ExitOnInterrupt — OpenMP's pool, a data source's producer — inherit the blocked mask;
// a thousand signals while they run are all the watcher's.
TEST(InterruptScopeDeathTest, NoThreadStartedLaterTakesTheSignal) {
  EXPECT_EXIT(
      {
        ExitOnInterrupt();
        InterruptScope scope;
        if (InterruptScope::Poll()) std::_Exit(3);
        std::atomic<int> unmasked{0};
        std::atomic<bool> done{false};
        std::vector<std::thread> workers;
        for (int t = 0; t < 3; ++t)
          workers.emplace_back([&] {
            sigset_t mask;
            pthread_sigmask(SIG_BLOCK, nullptr, &mask);
            if (!sigismember(&mask, SIGINT) || !sigismember(&mask, SIGTERM)) ++unmasked;
            while (!done.load()) {
            }
          });
        for (int i = 0; i < 1000; ++i) SignalProcess(i % 2 ? SIGTERM : SIGINT);
        done.store(true);
        for (std::thread& w : workers) w.join();
        if (!WaitForRequest()) std::_Exit(4);
        std::fprintf(stderr, "threads without the mask: %d\n", unmasked.load());
        std::_Exit(unmasked.load() == 0 ? 0 : 5);
      },
      ::testing::ExitedWithCode(0), "threads without the mask: 0");
}

// What `reel launch` does to the survivors of a failed rank: a SIGTERM that lands after the
// command's work ended, while it reports why it failed. The report still comes out whole.
TEST(InterruptScopeDeathTest, ASignalAfterTheScopeCannotCutTheFinalMessageOff) {
  EXPECT_EXIT(
      {
        { InterruptScope scope; }
        SignalProcess(SIGTERM);
        SignalProcess(SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
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
          SignalProcess(SIGINT);
          if (!WaitForRequest()) std::_Exit(3);
          InterruptScope::Poll();
        }
        InterruptScope second;
        // Past the first request's grace: it does not end the second scope's work either.
        std::this_thread::sleep_for(InterruptScope::kGrace * 2);
        std::_Exit(InterruptScope::Requested() ? 4 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Forming the group, opening data, `reel eval`: nothing polls, so the request cannot be honoured
// cleanly; the process ends with status 130 soon after instead of running on to its deadlines.
TEST(InterruptScopeDeathTest, ASignalThatNothingPollsEndsTheProcessWith130) {
  EXPECT_EXIT(
      {
        InterruptScope scope;
        SignalProcess(SIGTERM);
        SignalProcess(SIGTERM);  // a second one changes nothing: still 130, not killed by it
        // Far longer than kGrace: reaching the end means the watcher did not act.
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
        SignalProcess(SIGINT);
        std::this_thread::sleep_for(InterruptScope::kGrace * 3);  // a long step
        if (!InterruptScope::Poll()) std::_Exit(4);
        std::fputs("checkpoint written\n", stderr);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "checkpoint written");
}

// A thread that was running before ExitOnInterrupt (a host's, a test's) does not block the
// signals; one delivered to it is passed to the watcher, not lost and not fatal.
TEST(InterruptScopeDeathTest, ASignalOnAThreadThatDoesNotBlockItReachesTheWatcher) {
  EXPECT_EXIT(
      {
        std::atomic<bool> done{false};
        std::thread earlier([&] {
          while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
        InterruptScope scope;
        if (InterruptScope::Poll()) std::_Exit(3);
        ::pthread_kill(earlier.native_handle(), SIGTERM);
        const bool requested = WaitForRequest();
        done.store(true);
        earlier.join();
        std::_Exit(requested ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
}

// Outside a scope (every command before its work, and commands without a scope such as eval and
// predict), either signal ends the process at once with status 130, as docs/training.md says.
TEST(ExitOnInterruptDeathTest, SigintExits130) {
  EXPECT_EXIT(
      {
        ExitOnInterrupt();
        SignalProcess(SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(30));
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "reel: interrupted \\(SIGINT\\)");
}

TEST(ExitOnInterruptDeathTest, SigtermExits130) {
  EXPECT_EXIT(
      {
        ExitOnInterrupt();
        SignalProcess(SIGTERM);
        std::this_thread::sleep_for(std::chrono::seconds(30));
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
        SignalProcess(SIGTERM);
        std::_Exit(WaitForRequest() ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

// `reel launch` passes the signals on to its ranks: while forwarding, each arrives on the pipe.
TEST(ExitOnInterruptDeathTest, ForwardingHandsEachSignalOver) {
  EXPECT_EXIT(
      {
        ExitOnInterrupt();
        int fds[2];
        if (::pipe(fds) != 0) std::_Exit(3);
        {
          ForwardStopSignals forward(fds[1]);
          SignalProcess(SIGINT);
          int sig = 0;
          if (::read(fds[0], &sig, sizeof sig) != sizeof sig || sig != SIGINT) std::_Exit(4);
          SignalProcess(SIGTERM);
          if (::read(fds[0], &sig, sizeof sig) != sizeof sig || sig != SIGTERM) std::_Exit(5);
        }
        SignalProcess(SIGTERM);  // forwarding over: the exit again
        std::this_thread::sleep_for(std::chrono::seconds(30));
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "reel: interrupted \\(SIGTERM\\)");
}

}  // namespace
}  // namespace reel::cli
