#include "mpi_watchdog.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace reel::mpi {
namespace {

int64_t Milliseconds(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

CollectiveWatchdog::~CollectiveWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CollectiveWatchdog::Start() {
  thread_ = std::thread([this] { Run(); });
}

void CollectiveWatchdog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t seen_call = 0;        // the call armed at the last look
  Clock::time_point first_seen;  // when the watchdog first saw it armed
  while (!stop_) {
    const int64_t deadline_ns = deadline_ns_.load(std::memory_order_relaxed);
    const uint64_t call = call_.load(std::memory_order_relaxed);
    const Clock::time_point now = Clock::now();
    Clock::duration sleep = kPeriod;
    if (deadline_ns != 0) {
      if (call != seen_call) seen_call = call, first_seen = now;
      const Clock::time_point deadline{Clock::duration(deadline_ns)};
      if (now < deadline) {
        sleep = std::min<Clock::duration>(sleep, deadline - now);
      } else if (deadline_ns_.load(std::memory_order_relaxed) == deadline_ns &&
                 call_.load(std::memory_order_relaxed) == call) {
        Abort(call, deadline_ns, first_seen);
      }
    }
    wake_.wait_for(lock, sleep, [this] { return stop_; });
  }
}

void CollectiveWatchdog::Abort(uint64_t call, int64_t deadline_ns, Clock::time_point first_seen) {
  const Clock::time_point now = Clock::now();
  const std::string line =
      "reel mpi rank " + std::to_string(rank_) + ": " + what_.load(std::memory_order_relaxed) +
      " of " + std::to_string(floats_.load(std::memory_order_relaxed)) + " " +
      unit_.load(std::memory_order_relaxed) + " did not complete within its deadline (passed " +
      std::to_string(Milliseconds(now - Clock::time_point(Clock::duration(deadline_ns)))) +
      " ms ago; call " + std::to_string(call) + " of this communicator, in flight for at least " +
      std::to_string(Milliseconds(now - first_seen)) +
      " ms); MPI cannot take a native call back, so the MPI job is aborted\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  // Without MpiLock (mpi_runtime.h): the stuck call holds it under thread_level=serialized,
  // where MPI's rules would have this thread wait for it. Open MPI 4.1 supports MPI_Abort from
  // another thread in practice at either level (the watchdog tests run both): the abort goes to its
  // runtime (mpirun and its daemons), which ends every rank, not through the communication layers
  // the stuck call is in. Should it return, abort() ends the process, and mpirun ends the job when
  // a rank dies without MPI_Finalize.
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return; should it, the process must not go on
}

}  // namespace reel::mpi
