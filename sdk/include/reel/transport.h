// Transport and Communicator: how ranks talk.
//
// A Transport (inproc, tcp, mpi, ...) is a factory; Connect() joins this process's rank to the
// group and returns its Communicator. A Communicator offers tagged point-to-point messages of
// bytes, and collectives. Backends implement the point-to-point calls; the collectives are
// optional: a backend without them returns Unimplemented, and the host wraps every communicator in
// one that runs the core's ring algorithms on top of point-to-point (so an Optimizer always gets
// working collectives). A backend with native collectives (MPI) overrides them and says so in
// capabilities().
//
// Every blocking call takes a deadline; a call past it returns DeadlineExceeded, a vanished peer
// Unavailable naming the rank. Messages between one pair of ranks with the same tag arrive in
// the order sent; a message holds at most kMaxMessageBytes.
//
// Collectives whose arguments disagree (size, operation, root or collective, an empty buffer
// among full ones) fail on every rank with InvalidArgument before any data is touched, and the
// communicator stays usable. After any other failure of a collective on a rank (a deadline, a
// peer gone), its collectives (and Split) return FailedPrecondition on that rank from then on,
// naming the first failure, because messages of the failed call may still be on their way and
// would be taken for a later call's; point-to-point is unaffected; to go on, connect anew. (A
// backend may lift this once it knows the call completed on every rank, as mpi does for a Barrier.)
// The suite in reel/testing/transport_conformance.h checks all of this for a backend.
//
// Thread-safety: Send and Recv may be called from different threads at once (e.g. a ring
// sending to the right while receiving from the left); collectives are called by one thread
// per rank, in the same order on every rank.
#ifndef REEL_TRANSPORT_H_
#define REEL_TRANSPORT_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "reel/status.h"

namespace reel {

// Deadlines of blocking calls: points on the steady clock, so a clock change moves none.
using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The deadline of a call that may wait as long as it takes, and one `timeout` from now.
inline Deadline NoDeadline() { return Deadline::max(); }
inline Deadline DeadlineIn(std::chrono::milliseconds timeout) { return Clock::now() + timeout; }

// Recv's source for "whichever rank sends first".
constexpr int kAnySource = -1;

// Tags: every backend carries tags in [0, kMaxTag]; 32767 is the largest tag MPI guarantees
// (MPI_TAG_UB), so the same tag space fits every backend. Tags in [0, kCollectiveTagBase) belong to
// users (optimizers, the trainer, plugins); [kCollectiveTagBase, kMaxTag] are reserved for the
// core's collectives. A backend refuses tags outside [0, kMaxTag] and ranks outside [0, size())
// with InvalidArgument, at once.
//
// Sub-groups (Communicator::Split) that the core builds over a point-to-point backend share the
// parent's backend, so their messages travel on the parent's reserved tags and can never match
// the parent's: the parent's collectives cycle through [kCollectiveTagBase, kSubgroupTagBase), a
// sub-group's messages use [kSubgroupTagBase, kMaxTag] — its users get tags
// [0, kSubgroupUserTags) (sent as kSubgroupTagBase + tag), its collectives the rest. Hence one
// such sub-group per communicator is alive at a time, and it cannot be split again. A backend
// that splits natively (MPI_Comm_split) gives its sub-groups the full tag space.
constexpr int kMaxTag = 32767;
constexpr int kCollectiveTagBase = 16384;
constexpr int kSubgroupTagBase = 24576;
constexpr int kSubgroupUserTags = 1024;

// The largest point-to-point message every backend carries (INT_MAX bytes, what one MPI message
// of bytes holds): a Send of more returns InvalidArgument at once. Collectives cut larger buffers
// into messages themselves, except AllGather, whose per-rank block must fit one message.
constexpr size_t kMaxMessageBytes = 2147483647;

// How Allreduce combines the ranks' values, element by element.
enum class ReduceOp { kSum, kMax, kMin };

// A received point-to-point message: who sent it, under which tag, and its bytes.
struct Message {
  int source = 0;
  int tag = 0;
  std::vector<std::byte> payload;
};

// Which collectives the backend runs natively (the host's ring algorithms run the others).
struct CommunicatorCapabilities {
  bool native_allreduce = false;
  bool native_broadcast = false;
  bool native_allgather = false;
  bool native_barrier = false;
  bool native_reduce_scatter = false;  // ReduceScatter and AllGatherShards
};

// This rank's membership of a group, returned by Transport::Connect(); see the file comment.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `data` to rank `dest` with `tag` (>= 0). Returns once `data` may be reused.
  virtual Status Send(int dest, int tag, std::span<const std::byte> data, Deadline deadline) = 0;
  // Receives the next message with `tag` from `source` (or kAnySource).
  virtual Result<Message> Recv(int source, int tag, Deadline deadline) = 0;
  // Receives into a caller buffer; the message must be exactly out.size() bytes (InvalidArgument
  // naming both sizes otherwise). Backends may override to avoid the copy.
  virtual Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) {
    REEL_ASSIGN_OR_RETURN(Message m, Recv(source, tag, deadline));
    if (m.payload.size() != out.size())
      return InvalidArgumentError("message from rank " + std::to_string(m.source) + " tag " +
                                  std::to_string(tag) + " has " + std::to_string(m.payload.size()) +
                                  " bytes, expected " + std::to_string(out.size()));
    std::copy(m.payload.begin(), m.payload.end(), out.begin());
    return Status::Ok();
  }

  virtual CommunicatorCapabilities capabilities() const { return {}; }

  // A hint for the collectives this rank calls while it is set: `true` while they run alongside
  // this rank's own compute (the sync optimizer's gradient buckets during backward), so a backend
  // that busy-polls for its peers sleeps instead and leaves the cores to the compute; `false`
  // (the default) when the rank has nothing else to do than wait for them. Set and cleared by
  // the thread that calls the collectives; a backend may ignore it.
  virtual void SetComputeAlongside(bool alongside) { (void)alongside; }

  // Collectives: every rank calls them with the same arguments, in the same order; see the file
  // comment for arguments that disagree and for the communicator after a failed collective.
  // In place: afterwards every rank holds the elementwise reduction of all ranks' `data`.
  virtual Status AllReduce(std::span<float> /*data*/, ReduceOp /*op*/, Deadline /*deadline*/) {
    return UnimplementedError("AllReduce");
  }
  // Afterwards every rank's `data` equals the root's.
  virtual Status Broadcast(std::span<std::byte> /*data*/, int /*root*/, Deadline /*deadline*/) {
    return UnimplementedError("Broadcast");
  }
  // out.size() == size() * in.size(); afterwards out holds every rank's `in`, in rank order.
  virtual Status AllGather(std::span<const std::byte> /*in*/, std::span<std::byte> /*out*/,
                           Deadline /*deadline*/) {
    return UnimplementedError("AllGather");
  }
  virtual Status Barrier(Deadline /*deadline*/) { return UnimplementedError("Barrier"); }
  // The two halves of an allreduce, for an update sharded over the ranks (ZeRO stage 1), over the
  // shards of reel/shard_layout.h: shard i = ShardOf(data.size(), size(), i), contiguous, the last
  // ranks' possibly empty. Every rank passes its whole buffer. After ReduceScatter this rank's
  // shard of `data` holds the elementwise reduction of all ranks' `data` there; the rest of `data`
  // is unspecified. After AllGatherShards every rank's `data` holds, in each shard, the values
  // that shard's rank had there. Together they move the bytes of one AllReduce, and the core's
  // ring (reel/ring_allreduce.h) sums each element in the AllReduce's order: the same bits.
  virtual Status ReduceScatter(std::span<float> /*data*/, ReduceOp /*op*/, Deadline /*deadline*/) {
    return UnimplementedError("ReduceScatter");
  }
  virtual Status AllGatherShards(std::span<float> /*data*/, Deadline /*deadline*/) {
    return UnimplementedError("AllGatherShards");
  }

  // Splits the group as MPI_Comm_split does: every rank calls it, in the same order as the
  // collectives; ranks passing the same `color` (>= 0) form one sub-group, ranked by (`key`, rank
  // here). Returns this rank's sub-group, with working collectives. The sub-group must not
  // outlive this communicator. A backend without a native split returns Unimplemented and the
  // host's wrapper builds one over point-to-point (see the tag rule above).
  virtual Result<std::unique_ptr<Communicator>> Split(int /*color*/, int /*key*/,
                                                      Deadline /*deadline*/) {
    return UnimplementedError("Split");
  }
};

// Where this process stands in the group. Hosts fill it from flags, the config or the environment
// (REEL_RANK, REEL_WORLD_SIZE, REEL_COORDINATOR in the style of torchrun). A rank or world size of
// kDiscover asks the transport to find it itself: a backend whose runtime knows it (MPI under
// mpirun or srun) fills it in; one that cannot returns InvalidArgument naming what is missing.
// The Communicator's rank() and size() are the final word.
constexpr int kDiscover = -1;
struct TransportContext {
  int rank = 0;
  int world_size = 1;
  std::string coordinator;  // "host:port" of rank 0, for transports that rendezvous over a network
  // A peer that dies fails only what involves it (receives from it, sends to it, collectives),
  // instead of every receive of the group: for task-parallel work whose scheduler hands a dead
  // rank's work to others (reel tune, a parameter server). Transports that cannot isolate a
  // failure (MPI: the launcher ends the job) ignore it.
  bool isolate_failures = false;
};

// A backend (inproc, tcp, mpi, ...), built by a TransportFactory; Connect() forms the group.
class Transport {
 public:
  virtual ~Transport() = default;
  // Joins the group as ctx.rank. Blocks until the group is formed or the deadline passes.
  virtual Result<std::unique_ptr<Communicator>> Connect(const TransportContext& ctx,
                                                        Deadline deadline) = 0;
};

}  // namespace reel

#endif  // REEL_TRANSPORT_H_
