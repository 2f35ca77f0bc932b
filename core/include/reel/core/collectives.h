// Collectives on top of point-to-point: the core's ring algorithms for any Communicator.
//
// A transport backend (inproc, tcp, ...) implements tagged Send/Recv; WithRingCollectives() wraps
// it into a Communicator whose AllReduce, Broadcast, AllGather and Barrier work. Calls the backend
// implements natively (capabilities().native_*) are forwarded to it; the others run here, each
// after the ranks agreed on its arguments (reel/collective_agreement.h: ceil(log2 n) rounds of a
// few bytes, before any data moves):
//   - AllReduce: ring reduce-scatter followed by ring allgather over size() segments, each rank
//     sending 2(n-1)/n of the buffer. Segments travel in chunks of about 256 KiB, pipelined: the
//     sends to the right neighbour run on one helper thread, the receives from the left on
//     another (into the caller's buffer, or a few scratch chunks while reduce-scattering), and
//     this thread reduces, so sending, receiving and reducing overlap;
//   - Broadcast: a pipelined chain along the ring starting at the root, in chunks;
//   - AllGather: ring, n-1 steps;
//   - Barrier: the agreement alone (every rank hears from every other).
//
// Tags: tags >= kCollectiveTagBase (reel/transport.h) are reserved for collectives. The wrapper's
// Send/Recv refuse them (InvalidArgument), so a user's point-to-point message can never be taken
// for a collective's, nor the reverse. Every collective call takes a fresh tag from a
// per-communicator sequence (identical on all ranks because collectives are called in the same
// order). Tags come round again, so after a collective fails (other than by InvalidArgument) every
// later one is refused with FailedPrecondition (reel/transport.h): the failed call's leftovers can
// never be taken for a later call's data. Forwarded calls are refused too after a failure of the
// ring's; after a native one's, the backend, held to the same contract, decides for its own. A
// sub-group built over point-to-point whose collective failed tells its parent, which then refuses
// to build another on the same tags. Arguments that every rank passes but none may (a root outside
// the group, a wrong AllGather output) are refused on every rank after the agreement, so the ranks
// stay in step.
//
// Split: forwarded to a backend that splits natively; otherwise the wrapper gathers every rank's
// (color, key), and the sub-group is a wrapper of the same kind over a rank-translating view of
// this backend, on the sub-group tags of reel/transport.h (one alive at a time, not split again).
//
// Ownership: the wrapper owns the backend. Thread-safety: as Communicator — Send and Recv from
// any threads; collectives from one thread per rank, in the same order on every rank.
#ifndef REEL_CORE_COLLECTIVES_H_
#define REEL_CORE_COLLECTIVES_H_

#include <memory>

#include "reel/transport.h"

namespace reel::core {

// Wraps `backend` (must not be null) so that every collective works. The result reports the
// backend's capabilities unchanged (they say which collectives are native).
std::unique_ptr<Communicator> WithRingCollectives(std::unique_ptr<Communicator> backend);

}  // namespace reel::core

#endif  // REEL_CORE_COLLECTIVES_H_
