// The mpi transport's Communicator: one rank of an MPI job (mpirun, srun), point-to-point and
// native collectives (reel/transport.h is the contract; what users see of deadlines, thread levels
// and leaving is plugins/mpi/README.md).
//
// Each communicator duplicates MPI_COMM_WORLD twice, so user messages and collectives never match
// each other's receives; leave notices have a channel of their own (mpi_leave.h). The duplicates
// are never freed: MPI reuses a freed context id, and a late message for a destroyed communicator
// would land in a newer one. Every MPI error is returned (MPI_ERRORS_RETURN) as a Status naming
// the call and rank.
//
// Deadlines: operations are posted nonblocking and polled (mpi_wait.h). A Recv probes before it
// receives, so one that times out leaves no trace; a send or a matched receive past its deadline is
// abandoned, not undone (MPI may still use its buffer). Collectives first agree on arrival and
// arguments (mpi_collectives.cc; below 128 KiB an AllReduce carries its data in that same pass,
// mpi_exchange_allreduce.cc), then run the blocking native call: only the arrival can time out.
// Options polled_allreduce (MPI_Iallreduce, polled) and blocking_allreduce (the native call
// straight away, its deadline kept by mpi_watchdog.h's MPI_Abort) skip the agreement.
//
// After an arrival times out or a peer leaves during it, MPI cannot take this rank's contribution
// back, so the collectives fail from then on (FailedPrecondition naming the first failure) and MPI
// is left unfinalised at exit (mpi_runtime.h); a timed-out Barrier or polled AllReduce is whole
// once the late ranks arrive, and the collectives work again.
//
// Thread-safety: as Communicator (Send and Recv from any threads at once; collectives from one
// thread), at either thread_level (mpi_runtime.h: MpiLock under serialized).
#ifndef REEL_PLUGINS_MPI_SRC_MPI_COMMUNICATOR_H_
#define REEL_PLUGINS_MPI_SRC_MPI_COMMUNICATOR_H_

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mpi_runtime.h"
#include "mpi_watchdog.h"
#include "reel/options.h"
#include "reel/transport.h"

namespace reel::mpi {

struct MpiOptions {
  bool polled_allreduce = false;    // AllReduce without the arrival round (see above)
  bool blocking_allreduce = false;  // AllReduce as the bare native call, watched (see above)
  ThreadLevel thread_level = ThreadLevel::kMultiple;  // MPI's thread level (mpi_runtime.h)
};
OptionSchema MpiOptionSchema();
// InvalidArgument naming both for options that exclude each other (polled_allreduce,
// blocking_allreduce); MpiOptionsFrom and Connect both check.
Status CheckMpiOptions(const MpiOptions& options);
// InvalidArgument for a thread_level other than multiple or serialized (naming them), or what
// CheckMpiOptions refuses.
Result<MpiOptions> MpiOptionsFrom(const Options& options);

// The `mpi` transport: Connect() is MpiCommunicator::Connect.
std::unique_ptr<Transport> MakeMpiTransport(MpiOptions options = {});

// Below this many bytes AllReduce runs as one pass of point-to-point messages that carry the
// arguments (mpi_exchange_allreduce.cc) instead of the arrival round and the native call: there the
// round trip of the arrival round is most of the time (at 64-96 KiB on 3 ranks the pass took
// 0.7-0.8x the time of the round and the native call, bench/RESULTS.md; from
// 256 KiB up the two are even). So no message of that pass is longer.
constexpr size_t kExchangeBelowBytes = size_t{128} << 10;

// The collectives that agree on their arguments, by number (1 AllReduce, 2 Broadcast,
// 3 AllGather; 0 for any other name), and back.
int64_t CollectiveCode(const char* name);
std::string CollectiveName(int64_t code);

class MpiCommunicator final : public Communicator {
 public:
  // Joins MPI_COMM_WORLD: initialises MPI if needed (mpi_runtime.h), checks `ctx` against MPI's
  // rank and size (kDiscover accepts MPI's; any other disagreement is InvalidArgument naming both)
  // and duplicates the world communicator, which every rank must do, within the deadline.
  static Result<std::unique_ptr<Communicator>> Connect(const MpiOptions& options,
                                                       const TransportContext& ctx,
                                                       Deadline deadline);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Send(int dest, int tag, std::span<const std::byte> data, Deadline deadline) override;
  Result<Message> Recv(int source, int tag, Deadline deadline) override;
  Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) override;

  CommunicatorCapabilities capabilities() const override { return {true, true, true, true}; }
  Status AllReduce(std::span<float> data, ReduceOp op, Deadline deadline) override;
  Status Broadcast(std::span<std::byte> data, int root, Deadline deadline) override;
  Status AllGather(std::span<const std::byte> in, std::span<std::byte> out,
                   Deadline deadline) override;
  Status Barrier(Deadline deadline) override;

 private:
  // A posted operation given up on; what it reads or writes must live as long as the request.
  struct Abandoned {
    MPI_Request request;
    std::vector<std::byte> buffer;  // owned memory of the operation, if any
  };

  MpiCommunicator(const MpiOptions& options, int rank, int size, int64_t generation, MPI_Comm user,
                  MPI_Comm collective, std::vector<size_t> exchange_piece_bytes);
  Status PolledAllReduce(std::span<float> data, ReduceOp op, Deadline deadline);
  Status BlockingAllReduce(std::span<float> data, ReduceOp op, Deadline deadline);
  // A small AllReduce in one pass of point-to-point messages that carry the arguments
  // (mpi_exchange_allreduce.cc); ExchangeStep sends to and/or receives from one peer (-1: none).
  // The arguments seen so far: this rank's, widened by every other rank's it heard of. Word 0 is
  // the collective (CollectiveCode), words 1 and 2 its arguments (AllReduce: size and operation).
  struct ExchangeArgs {
    static constexpr size_t kWords = 3;
    static constexpr size_t kBytes = 2 * kWords * sizeof(int64_t);  // on the wire: lo, then hi
    int64_t lo[kWords], hi[kWords];
    static ExchangeArgs Of(int64_t collective, int64_t first, int64_t second) {
      return {{collective, first, second}, {collective, first, second}};
    }
    bool Agree() const { return std::equal(lo, lo + kWords, hi); }
    bool operator==(const ExchangeArgs& o) const {
      return std::equal(lo, lo + kWords, o.lo) && std::equal(hi, hi + kWords, o.hi);
    }
    void Merge(const ExchangeArgs& o) {
      for (size_t i = 0; i < kWords; ++i)
        lo[i] = std::min(lo[i], o.lo[i]), hi[i] = std::max(hi[i], o.hi[i]);
    }
  };
  enum class Landing { kCombine, kReplace };  // a received message is reduced in, or is the result
  // The largest message ExchangeStep sends to each rank (0: the whole data in one message), from
  // which ranks share this rank's node (mpi_exchange_allreduce.cc says why).
  static std::vector<size_t> ExchangePieceBytes(const std::vector<bool>& on_this_node);
  Status ExchangeAllReduce(std::span<float> data, ReduceOp op, Deadline deadline);
  // One pass (recursive doubling) that merges every rank's *args into each rank's; `with_data`:
  // moving and reducing `data` as well while the ranks agree (the small AllReduce), else
  // arguments only (every collective's arrival round, Agree). Errors are its messages' own.
  Status ExchangePass(std::span<float> data, ReduceOp op, bool with_data, ExchangeArgs* args,
                      Deadline deadline, const std::string& what);
  Status ExchangeStep(int send_to, int receive_from, Landing landing, std::span<float> data,
                      ReduceOp op, bool with_data, ExchangeArgs* args, Deadline deadline,
                      const std::string& what);

  std::string Where() const { return "mpi rank " + std::to_string(rank_); }
  Status CheckPeer(int peer, const char* what, bool any_allowed) const;
  Status CheckTag(int tag, const char* what) const;

  // Polls `*request` until it completes (OK), the deadline passes, or `gone()` returns an error.
  // On failure it cancels the request if `cancellable` and MPI can; *request stays set when the
  // operation is still posted.
  // `spin_for`: how long it spins before it yields the core or sleeps (mpi_wait.h). `status`:
  // the completed operation's.
  Status Await(MPI_Request* request, Deadline deadline, const std::string& what,
               const std::function<Status()>& gone, bool cancellable,
               std::chrono::microseconds spin_for = std::chrono::microseconds(0),
               MPI_Status* status = MPI_STATUS_IGNORE);
  // Keeps a still-posted request (if any) and `*owned`, its memory, until destruction.
  void Abandon(MPI_Request* request, std::vector<std::byte>* owned);
  // How many requests were abandoned so far.
  size_t AbandonedCount();

  // A matched message (MPI_Improbe), not yet received.
  struct Probed {
    MPI_Message message;
    MPI_Status status;
    size_t bytes = 0;
    std::string what;  // "mpi rank R: Recv from rank S tag T", for errors
  };
  // Checks the arguments, then probes for a message from `source` (or any) with `tag` until one
  // is there, the deadline passes or the sender has left.
  Result<Probed> Probe(int source, int tag, Deadline deadline);
  // Receives a probed message of p.bytes bytes into `into` (as many bytes).
  Status ReceiveProbed(Probed& p, std::span<std::byte> into, Deadline deadline,
                       std::vector<std::byte>* owned);

  // Unavailable when the peer(s) an operation waits for have left (mpi_leave.h).
  Status SenderGone(int source, int tag, const std::string& what);
  Status PeerGone(int peer, const std::string& what);
  Status CollectivePeerGone(const std::string& what);

  // Collectives: waits (polled) until every rank has arrived at `collective`, then checks that
  // all are in the same collective and passed the same `args` (InvalidArgument naming the
  // collectives or the argument otherwise; the communicator stays usable). The arrival is the
  // exchange pass without data (ExchangePass), which a small AllReduce's pass meets.
  struct NamedArg {
    const char* name;
    int64_t value;
  };
  Status Agree(const char* collective, const std::vector<NamedArg>& args, Deadline deadline);
  // InvalidArgument naming what the ranks disagree about (the collective, else the first of
  // `args` they differ on), from every rank's arguments merged in `all`.
  Status Disagreement(const std::string& what, const char* collective,
                      const std::vector<NamedArg>& args, const ExchangeArgs& all) const;
  Status CollectivesUsable(const char* collective);

  const MpiOptions options_;
  const int rank_, size_;
  // Which communicator of this process this is (1, 2, ...), as leave notices name it.
  const int64_t generation_;
  MPI_Comm user_, collective_;

  std::mutex mu_;
  std::map<std::pair<int, int>, int64_t> sent_;      // (dest, tag) -> messages; guarded by mu_
  std::map<std::pair<int, int>, int64_t> received_;  // (source, tag) -> messages; guarded by mu_
  std::vector<Abandoned> abandoned_;                 // guarded by mu_

  // Collectives run on one thread per rank (the contract), so these need no lock (the destructor
  // reads collectives_completed_ after the last collective returned).
  int64_t collectives_completed_ = 0;  // arrivals completed (Agree, Barrier)
  std::string collectives_failed_;     // why collectives are unusable; empty if usable
  // An abandoned Barrier or AllReduce that may yet complete; `late_noted_`: it was counted by
  // NoteAbandonedCollective (an AllReduce, which MPI_Finalize might wait for).
  std::optional<MPI_Request> late_collective_;
  bool late_noted_ = false;
  const std::vector<size_t> exchange_piece_bytes_;  // by rank: see ExchangePieceBytes
  std::vector<std::byte> exchange_scratch_;         // a peer's data in ExchangeStep
  std::vector<float> exchange_original_;            // its data as passed (beyond 2 ranks)
  CollectiveWatchdog watchdog_;  // deadlines of native calls that cannot time out
};

}  // namespace reel::mpi

#endif  // REEL_PLUGINS_MPI_SRC_MPI_COMMUNICATOR_H_
