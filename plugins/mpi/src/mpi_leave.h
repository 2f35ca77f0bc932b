// Leave notices: how a rank that destroys its communicator tells the others it is gone, so that
// their receives, sends and collectives waiting for it return Unavailable instead of running into
// their deadlines (MPI itself knows nothing of a rank that stops talking).
//
// A notice names the communicator's generation (its number among the communicators this process
// formed; every rank connects in the same order, so the numbers agree), how many collectives the
// leaving rank completed, and, per tag, how many messages it sent the receiver. A rank that left
// is gone for a receive only once everything it sent is in, and for a collective only if it left
// before completing that one (a rank may leave right after a collective that the others still
// have to finish polling for).
//
// All notices travel on one process-wide duplicate of MPI_COMM_WORLD, made by the first Connect and
// never freed. Per-communicator channels would not do: MPI reuses a freed communicator's context
// id, and a notice arriving after its receiver freed the channel lands in the next communicator
// with that id and breaks MPI's message ordering there.
//
// Thread-safety: every function may be called from any thread.
#ifndef REEL_PLUGINS_MPI_SRC_MPI_LEAVE_H_
#define REEL_PLUGINS_MPI_SRC_MPI_LEAVE_H_

#include <cstdint>
#include <map>
#include <utility>

#include "reel/transport.h"

namespace reel::mpi {

// What a rank said when it left.
struct LeftRank {
  int64_t collectives_completed = 0;
  std::map<int, int64_t> sent;  // messages sent to this rank, by tag
};

// Makes the notice channel if it does not exist yet. Collective over MPI_COMM_WORLD: every rank's
// first Connect calls it. REQUIRES: no other thread forms communicators at the same time.
Status EnsureLeaveChannel(int rank, Deadline deadline);

// Tells every other rank that this one leaves communicator `generation`; `sent` holds the
// messages sent on it, by (dest, tag). Waits at most briefly for the notices to go out.
void SendLeaveNotices(int64_t generation, int rank, int size, int64_t collectives_completed,
                      const std::map<std::pair<int, int>, int64_t>& sent);

// The ranks that have left communicator `generation`, with what each sent this rank. Receives the
// notices that have arrived first.
std::map<int, LeftRank> LeftRanks(int64_t generation);

// Drops what is known about communicator `generation` (it is being destroyed).
void ForgetLeftRanks(int64_t generation);

}  // namespace reel::mpi

#endif  // REEL_PLUGINS_MPI_SRC_MPI_LEAVE_H_
