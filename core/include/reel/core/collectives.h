// Collectives on top of point-to-point: the core's ring algorithms for any Communicator.
//
// A transport backend (inproc, tcp, ...) implements tagged Send/Recv; WithRingCollectives() wraps
// it into a Communicator whose AllReduce, Broadcast, AllGather and Barrier work. Calls the backend
// implements natively (capabilities().native_*) are forwarded to it; the others run here, each
// after the ranks agreed on its arguments (reel/collective_agreement.h, before any data moves):
// AllReduce as ring reduce-scatter + ring allgather (each rank sends 2(n-1)/n of the buffer, in
// pipelined chunks of about 256 KiB: sends, receives and the reduction overlap on three threads);
// Broadcast as a pipelined chain from the root; AllGather as a ring; Barrier as the agreement.
//
// Tags >= kCollectiveTagBase (reel/transport.h) are the collectives': the wrapper's Send/Recv
// refuse them, so point-to-point and collective messages never mix. Each call takes the next tag
// of a per-communicator sequence (the same on every rank: collectives come in the same order).
// Tags come round again, so after a collective fails (other than by InvalidArgument) every later
// one, forwarded ones included, is FailedPrecondition (reel/transport.h): a failed call's
// leftovers can never be taken for a later call's data; after a native call's failure the
// backend, held to the same contract, decides. A sub-group whose collective failed makes its
// parent refuse another Split on the same tags. Arguments every rank passes but none may (a root
// outside the group, a wrong AllGather output) are refused on every rank after the agreement.
//
// Split: forwarded to a backend that splits natively; otherwise a wrapper of the same kind over a
// rank-translating view of this backend, on the sub-group tags (one alive at a time, not split
// again). Ownership: the wrapper owns the backend. Thread-safety: as Communicator: Send and Recv
// from any threads; collectives from one thread per rank, in the same order on every rank.
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
