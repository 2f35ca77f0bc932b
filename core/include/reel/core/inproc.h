// The in-process transport: N ranks as threads of one process, for tests, demos and hosts that
// want data parallelism without a network.
//
// Two ways in:
//   - directly: CreateInprocGroup(n) returns n connected communicators at once (rank i is element
//     i); hand each to its own thread;
//   - as the registered Transport "inproc" (option `world`, the group's name): every thread calls
//     Connect({rank, world_size}) on a transport with the same `world`, and all of them return
//     once the whole group has joined. The name is freed when the group is complete, so a later
//     run may reuse it.
//
// Semantics: messages are copied at Send (the caller's buffer is free on return) and queued at
// the receiver, FIFO per (source, tag). Memory is bounded: while one rank's messages waiting at
// another hold `receive_budget_bytes` or more, its next Send to that rank waits for a receive to
// take some (DeadlineExceeded at its deadline, Unavailable if the receiver leaves);
// Recv(kAnySource, tag) takes the oldest queued message with that tag. A rank leaves when its
// communicator is destroyed: messages it sent before remain receivable; afterwards Send to it, and
// Recv waiting on it alone, return Unavailable naming the rank; Recv(kAnySource) returns
// Unavailable once every other rank has left. Deadlines give DeadlineExceeded naming the rank, the
// peer and the tag.
//
// The communicators here implement point-to-point only (their collectives are Unimplemented);
// wrap them with WithRingCollectives() (reel/core/collectives.h) for collectives.
//
// Thread-safety: a communicator's Send and Recv may be called from several threads at once.
#ifndef REEL_CORE_INPROC_H_
#define REEL_CORE_INPROC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reel/transport.h"

namespace reel::core {

// What one rank's messages may hold at another before its sends wait (the tcp transport's default
// per-peer budget too).
inline constexpr uint64_t kDefaultInprocReceiveBudgetBytes = uint64_t{256} << 20;

// n >= 1 communicators of a new anonymous group. Errors: InvalidArgument for n < 1.
Result<std::vector<std::unique_ptr<Communicator>>> CreateInprocGroup(
    int n, uint64_t receive_budget_bytes = kDefaultInprocReceiveBudgetBytes);

// The Transport behind the registered "inproc" component: Connect() joins the group named
// `world`. Errors from Connect: InvalidArgument for a rank outside [0, world_size) or a
// world_size that differs from the one the group was started with; AlreadyExists when the rank
// is taken; DeadlineExceeded naming the ranks still missing. Asked to discover its rank and size
// (both kDiscover), it forms a group of this one rank: no launcher can have placed others in it.
std::unique_ptr<Transport> MakeInprocTransport(
    std::string world, uint64_t receive_budget_bytes = kDefaultInprocReceiveBudgetBytes);

}  // namespace reel::core

#endif  // REEL_CORE_INPROC_H_
