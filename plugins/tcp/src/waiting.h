// Waiting until a Deadline on a condition variable or a future. The far-future deadline
// (NoDeadline()) waits without a timeout, because converting time_point::max() for a timed wait
// can overflow.
#ifndef REEL_PLUGINS_TCP_SRC_WAITING_H_
#define REEL_PLUGINS_TCP_SRC_WAITING_H_

#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>

#include "reel/transport.h"

namespace reel::tcp {

// Now on the steady clock, in nanoseconds (for atomics that record when something happened).
inline int64_t NowNs() { return Clock::now().time_since_epoch().count(); }

// False when the deadline passed (the caller re-checks its condition either way).
inline bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                      Deadline deadline) {
  if (deadline == Deadline::max()) {
    cv.wait(lock);
    return true;
  }
  return cv.wait_until(lock, deadline) == std::cv_status::no_timeout;
}

// A mutex whose lock can give up at a deadline (the TimedLockable requirements, so
// std::unique_lock and std::lock_guard take it), built on std::mutex and a condition variable.
// Not std::timed_mutex: its try_lock_until calls pthread_mutex_clocklock, which ThreadSanitizer
// (GCC 12's) does not intercept, so TSan saw unlocks of a mutex it never saw locked and lost
// track of what the mutex guards (a peer's outgoing connection).
class DeadlineMutex {
 public:
  void lock() {
    std::unique_lock<std::mutex> lock(mu_);
    while (held_) cv_.wait(lock);
    held_ = true;
  }
  bool try_lock() {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_) return false;
    held_ = true;
    return true;
  }
  bool try_lock_until(Deadline deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    while (held_)
      if (!WaitUntil(cv_, lock, deadline) && held_) return false;
    held_ = true;
    return true;
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = false;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;  // guarded by mu_
};

// False when the deadline passed before the future was ready.
template <typename T>
bool WaitUntil(std::future<T>& f, Deadline deadline) {
  if (deadline == Deadline::max()) {
    f.wait();
    return true;
  }
  return f.wait_until(deadline) == std::future_status::ready;
}

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_WAITING_H_
