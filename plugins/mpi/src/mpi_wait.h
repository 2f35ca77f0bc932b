// Waiting for MPI without blocking inside MPI, so every call can honour its deadline.
//
// MPI's blocking calls cannot time out, so the transport posts nonblocking operations and polls
// them (MPI_Test, MPI_Improbe) until they finish or the deadline passes. Open MPI moves data only
// inside MPI calls (there is no progress thread for its shared-memory and TCP transports), so a
// waiter must keep calling in: Backoff spins first (a message that is about to complete costs no
// sleep), then yields the core (ranks may outnumber cores), and only then sleeps, in pauses short
// enough that a transfer in flight keeps moving. A wait for a native collective that moves data
// itself (mpi option polled_allreduce) first spins for a while without yielding: its data moves
// only while it polls, and a yield on a loaded machine can cost a whole time slice per round of
// the collective's algorithm.
//
// Thread-safety: a Backoff belongs to one waiting thread.
#ifndef REEL_PLUGINS_MPI_SRC_MPI_WAIT_H_
#define REEL_PLUGINS_MPI_SRC_MPI_WAIT_H_

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "reel/transport.h"

namespace reel::mpi {

class Backoff {
 public:
  // Spins for at least `spin_for` before it starts yielding.
  explicit Backoff(std::chrono::microseconds spin_for = std::chrono::microseconds(0))
      : spin_for_(spin_for) {}

  void Pause() {
    using namespace std::chrono_literals;
    ++polls_;
    if (polls_ < kSpinPolls) return;
    const auto waited = Clock::now() - start_;
    if (waited < spin_for_) return;
    if (waited < spin_for_ + kYieldFor) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, kMaxSleep);
  }

 private:
  static constexpr int kSpinPolls = 256;
  static constexpr std::chrono::microseconds kYieldFor{5000};
  static constexpr std::chrono::microseconds kMaxSleep{200};

  const std::chrono::microseconds spin_for_;
  const Clock::time_point start_ = Clock::now();
  int polls_ = 0;
  std::chrono::microseconds sleep_{10};
};

}  // namespace reel::mpi

#endif  // REEL_PLUGINS_MPI_SRC_MPI_WAIT_H_
