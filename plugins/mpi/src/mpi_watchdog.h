// The deadline of a blocking native collective: AllReduce with the mpi option blocking_allreduce,
// and the data phase of every collective once its arrival round has passed (mpi_communicator.h).
//
// A blocking MPI call cannot time out and cannot be taken back, so the deadline is kept by a
// watchdog, as NCCL's keeps its collectives': the caller arms it before the native call and
// disarms it after, with relaxed atomic stores only (no syscall, lock or wake-up per call: the
// blocking_allreduce option exists to make small allreduces as cheap as raw MPI's). A thread of the
// watchdog's own, started at the first Arm, looks every kPeriod (or at the armed deadline, if
// sooner); when the call it armed is still in flight past its deadline it writes one line to stderr
// and calls MPI_Abort: the job ends with that message instead of hanging, since no return from the
// call can be had. It calls MPI_Abort without MpiLock, which the stuck call holds under
// thread_level=serialized (mpi_watchdog.cc says why that works).
//
// The thread reads the armed values without a lock, in relaxed order: it acts only when, after it
// read the clock past the armed deadline, a second read still shows the same call armed, so a call
// that completed meanwhile is not taken for a stuck one; at worst its message names the size of a
// neighbouring call.
//
// Thread-safety: Arm and Disarm from one thread (collectives run on one thread per rank);
// destruction once no call is armed.
#ifndef REEL_PLUGINS_MPI_SRC_MPI_WATCHDOG_H_
#define REEL_PLUGINS_MPI_SRC_MPI_WATCHDOG_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

#include "reel/transport.h"

namespace reel::mpi {

class CollectiveWatchdog {
 public:
  // How often the thread looks at the armed call when its deadline is further away.
  static constexpr std::chrono::milliseconds kPeriod{50};

  explicit CollectiveWatchdog(int rank) : rank_(rank) {}
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // A collective (`call`, e.g. "AllReduce", of `count` `unit`s, e.g. "floats"; both static
  // strings) that must complete by `deadline` (not NoDeadline(): such a call needs no watchdog)
  // is about to start. Starts the thread on the first call.
  void Arm(Deadline deadline, const char* call, size_t count, const char* unit) {
    if (!thread_.joinable()) Start();
    what_.store(call, std::memory_order_relaxed);
    unit_.store(unit, std::memory_order_relaxed);
    floats_.store(count, std::memory_order_relaxed);
    call_.store(++calls_, std::memory_order_relaxed);
    // 0 means disarmed; a steady clock's deadlines are later than its epoch.
    deadline_ns_.store(std::max<int64_t>(1, deadline.time_since_epoch().count()),
                       std::memory_order_relaxed);
  }
  // The armed call returned.
  void Disarm() { deadline_ns_.store(0, std::memory_order_relaxed); }

 private:
  void Start();
  void Run();
  [[noreturn]] void Abort(uint64_t call, int64_t deadline_ns, Clock::time_point first_seen);

  const int rank_;
  uint64_t calls_ = 0;                   // calls armed so far; the arming thread's own
  std::atomic<int64_t> deadline_ns_{0};  // the armed call's deadline since Clock's epoch; 0: none
  std::atomic<uint64_t> call_{0};        // the armed call's number (calls_)
  std::atomic<size_t> floats_{0};        // the armed call's size, for the message
  std::atomic<const char*> what_{""};    // the armed call's name and unit, for the message
  std::atomic<const char*> unit_{""};

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;  // signalled only to stop the thread
  bool stop_ = false;             // guarded by mu_
};

// Arms `watchdog` for the scope's native call when `deadline` is not NoDeadline().
class Watched {
 public:
  Watched(CollectiveWatchdog& watchdog, Deadline deadline, const char* call, size_t count,
          const char* unit)
      : watchdog_(deadline != NoDeadline() ? &watchdog : nullptr) {
    if (watchdog_) watchdog_->Arm(deadline, call, count, unit);
  }
  ~Watched() {
    if (watchdog_) watchdog_->Disarm();
  }
  Watched(const Watched&) = delete;
  Watched& operator=(const Watched&) = delete;

 private:
  CollectiveWatchdog* watchdog_;
};

}  // namespace reel::mpi

#endif  // REEL_PLUGINS_MPI_SRC_MPI_WATCHDOG_H_
