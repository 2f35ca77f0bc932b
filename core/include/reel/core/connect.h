// Connecting several ranks of one process at once. A Transport's Connect() blocks until the whole
// group has joined, so the ranks a process hosts (trainer.local_ranks, or a test's group of
// threads) must join concurrently, each from its own thread.
//
// Thread-safety: blocks the caller; starts and joins one thread per rank.
#ifndef REEL_CORE_CONNECT_H_
#define REEL_CORE_CONNECT_H_

#include <memory>
#include <span>
#include <vector>

#include "reel/transport.h"

namespace reel::core {

// Connects every context of `ranks` through `transport` concurrently. The backends'
// communicators in the order of `ranks` (not wrapped; see WithRingCollectives), or the first
// failure with the rank it concerns in its message (the communicators that did connect are closed).
Result<std::vector<std::unique_ptr<Communicator>>> ConnectConcurrently(
    Transport& transport, std::span<const TransportContext> ranks, Deadline deadline);

}  // namespace reel::core

#endif  // REEL_CORE_CONNECT_H_
