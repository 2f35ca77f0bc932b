// How long ranks wait for each other: the one home of the defaults behind the run config's
// transport.connect_timeout_seconds and transport.timeout_seconds. With them a rank that died or
// stopped answering is an error naming it (DeadlineExceeded, or Unavailable from the transport),
// never a hang.
#ifndef REEL_CORE_TIMEOUTS_H_
#define REEL_CORE_TIMEOUTS_H_

#include <chrono>

namespace reel::core {

// The defaults when the run config sets no timeout.
inline constexpr std::chrono::milliseconds kDefaultConnectTimeout = std::chrono::minutes(5);
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(5);

// The two waits of a run: for the group to form, and for each exchange after that.
struct Timeouts {
  std::chrono::milliseconds connect = kDefaultConnectTimeout;  // Connect(): the group forms
  // Every collective or message after that: a step's agreement and allreduce, the evaluation's
  // and checkpoints' gathers. Generous, because a rank may be busy (rank 0 writing a
  // checkpoint) while the others already wait in the next collective.
  std::chrono::milliseconds each = kDefaultTimeout;
};

}  // namespace reel::core

#endif  // REEL_CORE_TIMEOUTS_H_
