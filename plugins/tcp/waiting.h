// Waiting until a Deadline on a condition variable or a future. The far-future deadline
// (NoDeadline()) waits without a timeout, because converting time_point::max() for a timed wait
// can overflow.
#ifndef REEL_PLUGINS_TCP_WAITING_H_
#define REEL_PLUGINS_TCP_WAITING_H_

#include <condition_variable>
#include <future>
#include <mutex>

#include "reel/transport.h"

namespace reel::tcp {

// False when the deadline passed (the caller re-checks its condition either way).
inline bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                      Deadline deadline) {
  if (deadline == Deadline::max()) {
    cv.wait(lock);
    return true;
  }
  return cv.wait_until(lock, deadline) == std::cv_status::no_timeout;
}

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

#endif  // REEL_PLUGINS_TCP_WAITING_H_
