// A small AllReduce in one pass of point-to-point messages (mpi_communicator.h): recursive
// doubling, with MPICH's folding when the rank count is not a power of two (the first 2*rem ranks
// pair up, the even one hands its data to the odd one before and takes the result back after).
// This is the algorithm Open MPI itself runs for small allreduces, but each message is posted
// nonblocking and polled against the deadline and for ranks that left, and it carries the
// arguments with it: its size is the sender's element count and its tag the operation, so one pass
// both checks the arguments and moves the data, where the arrival round costs a round trip of its
// own (most of a small allreduce). A rank that sees a disagreement passes a small arguments
// message on instead of data, so every rank learns it in the same pass, fails with it and keeps
// its data as it was. To a rank on this node a step's data goes in pieces under Open MPI's
// shared-memory eager limit (ExchangePieceBytes); the first piece's tag says how many follow.
//
// The same pass without data is every other collective's arrival round (Agree, in
// mpi_collectives.cc; a large AllReduce's too): every message is an arguments message. So ranks
// whose AllReduce sizes fall on both sides of kExchangeBelowBytes, or that are in different
// collectives, meet in one pass whichever path each chose, and all learn the disagreement.
#include <algorithm>
#include <cstring>

#include "mpi_communicator.h"
#include "mpi_runtime.h"
#include "mpi_wait.h"
#include "reel/ring_allreduce.h"

namespace reel::mpi {
namespace {

// Tags on the collective communicator (point-to-point there is used by this pass only): a step's
// first data message is tagged with the operation and the number of messages the sender cuts its
// data into (see ExchangePieceBytes), so that the receiver learns how many more follow (kRestTag)
// whatever its own size; arguments without data are one message, kArgsTag.
constexpr int kDataTag = 100;
constexpr int kOpTags = 4;    // tags per piece count: one per ReduceOp
constexpr int kArgsTag = 99;  // an arguments message (ExchangeArgs::kBytes), no data
constexpr int kRestTag = 98;
int DataTag(ReduceOp op, int pieces) {
  return kDataTag + static_cast<int>(op) + kOpTags * (pieces - 1);
}
// What a first data message's tag says (DataTag's inverse).
int PiecesOf(int tag) { return (tag - kDataTag) / kOpTags + 1; }
int64_t OperationOf(int tag) { return (tag - kDataTag) % kOpTags; }
// Every receive has room for the largest message of the pass (a sender's whole data below
// kExchangeBelowBytes, or the rest of it after its first pieces), whatever this rank's own size:
// a message longer than its receive must never arrive, as Open MPI's shared memory writes a
// truncated message whole past the end of the buffer (seen with Open MPI 4.1 when it went by
// rendezvous). So every sender's size is learnt exactly, and an arguments message fits too.
constexpr size_t kScratchBytes = kExchangeBelowBytes;
// Open MPI's eager limit counts its header too: a piece leaves it this much room.
constexpr size_t kHeaderBytes = 64;
// A smaller eager limit is not worth cutting a message into that many pieces for.
constexpr size_t kMinPieceBytes = 1024;
// Above this many bytes a step sends its data whole: the pieces' second copy (through the shared
// memory) then costs about what the rendezvous saves (measured: even at 60 KiB on 2 ranks).
constexpr size_t kPiecesUpTo = size_t{32} << 10;

// Element-wise into `dst`: op(dst, src) when `dst_first`, else op(src, dst). The lower rank's
// values go first, so that both ranks of a pair compute bit for bit the same result whatever the
// operation (max and min keep their first operand when either is NaN). IEEE addition commutes,
// so only max and min with `src` first need loops of their own beside the ring's; all of them on
// pointers that do not overlap, so that the compiler vectorizes each.
void Combine(float* __restrict dst, const float* __restrict src, size_t n, ReduceOp op,
             bool dst_first) {
  if (dst_first || op == ReduceOp::kSum) return ring::Reduce(dst, src, n, op);
  if (op == ReduceOp::kMax) {
    for (size_t i = 0; i < n; ++i) dst[i] = std::max(src[i], dst[i]);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = std::min(src[i], dst[i]);
  }
}

}  // namespace

// Open MPI's shared-memory transport sends a message of up to btl_vader_eager_limit bytes (4 KiB
// by default, its header included) eagerly, and a longer one by rendezvous, a round trip more: a
// 4096-byte allreduce on 2 ranks in one message per step took 5x raw MPI's time
// (bench/RESULTS.md); cut into pieces under the limit it takes about raw MPI's time at 4 KiB and
// less up to 32 KiB, on 2 and 3 ranks. Over TCP (other nodes, or `--mca
// btl tcp,self`) the eager limit is 64 KiB and pieces only cost, so a step cuts its data into
// pieces only for a rank on this node while that transport is in use.
std::vector<size_t> MpiCommunicator::ExchangePieceBytes(const std::vector<bool>& on_this_node) {
  const size_t limit = SharedMemoryEagerLimit();
  const size_t piece = limit >= kMinPieceBytes + kHeaderBytes
                           ? (limit - kHeaderBytes) / sizeof(float) * sizeof(float)
                           : 0;
  std::vector<size_t> bytes(on_this_node.size(), 0);
  for (size_t r = 0; r < bytes.size(); ++r)
    if (on_this_node[r]) bytes[r] = piece;
  return bytes;
}

Status MpiCommunicator::ExchangeAllReduce(std::span<float> data, ReduceOp op, Deadline deadline) {
  REEL_RETURN_IF_ERROR(CollectivesUsable("AllReduce"));
  const std::string what = Where() + ": AllReduce of " + std::to_string(data.size()) + " floats";
  const auto size = static_cast<int64_t>(data.size());
  ExchangeArgs args = ExchangeArgs::Of(CollectiveCode("AllReduce"), size, static_cast<int64_t>(op));
  // Beyond 2 ranks a disagreement may come to light only after this rank combined data of a
  // rank that agreed: the data as it was, to give it back then.
  if (size_ > 2) exchange_original_.assign(data.begin(), data.end());
  if (Status s = ExchangePass(data, op, /*with_data=*/true, &args, deadline, what); !s.ok()) {
    // Messages of this pass may still be under way, and a later pass would take them for its
    // own: the collectives of this communicator stop here (mpi_communicator.h).
    collectives_failed_ = "AllReduce failed: " + s.message();
    return s;
  }
  ++collectives_completed_;
  if (args.Agree()) return Status::Ok();
  if (size_ > 2) std::copy(exchange_original_.begin(), exchange_original_.end(), data.begin());
  return Disagreement(what, "AllReduce", {{"size", size}, {"operation", static_cast<int64_t>(op)}},
                      args);
}

Status MpiCommunicator::ExchangePass(std::span<float> data, ReduceOp op, bool with_data,
                                     ExchangeArgs* args, Deadline deadline,
                                     const std::string& what) {
  exchange_scratch_.resize(kScratchBytes);
  int pow2 = 1;
  while (pow2 * 2 <= size_) pow2 *= 2;
  const int rem = size_ - pow2;
  auto step = [&](int send_to, int receive_from, Landing landing) {
    return ExchangeStep(send_to, receive_from, landing, data, op, with_data, args, deadline, what);
  };
  if (rank_ < 2 * rem && rank_ % 2 == 0) {  // folded: hands its data over, takes the result back
    REEL_RETURN_IF_ERROR(step(rank_ + 1, -1, Landing::kCombine));
    return step(-1, rank_ + 1, Landing::kReplace);
  }
  if (rank_ < 2 * rem) REEL_RETURN_IF_ERROR(step(-1, rank_ - 1, Landing::kCombine));
  const int me = rank_ < 2 * rem ? rank_ / 2 : rank_ - rem;  // among the pow2 that exchange
  for (int mask = 1; mask < pow2; mask <<= 1) {
    const int other = me ^ mask;
    const int peer = other < rem ? other * 2 + 1 : other + rem;
    REEL_RETURN_IF_ERROR(step(peer, peer, Landing::kCombine));
  }
  if (rank_ < 2 * rem) return step(rank_ - 1, -1, Landing::kCombine);
  return Status::Ok();
}

Status MpiCommunicator::ExchangeStep(int send_to, int receive_from, Landing landing,
                                     std::span<float> data, ReduceOp op, bool with_data,
                                     ExchangeArgs* args, Deadline deadline,
                                     const std::string& what) {
  const int peer = send_to >= 0 ? send_to : receive_from;
  const std::string step = what + " (with rank " + std::to_string(peer) + ")";
  auto gone = [&] { return CollectivePeerGone(step); };
  const size_t bytes = data.size() * sizeof(float);
  std::byte* const scratch = exchange_scratch_.data();
  // The first message's receive first (posted before the peer's message arrives, as MPI's own
  // collectives do).
  MPI_Request receiving = MPI_REQUEST_NULL;
  if (receive_from >= 0)
    REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] {
                                     return MPI_Irecv(scratch, static_cast<int>(kScratchBytes),
                                                      MPI_BYTE, receive_from, MPI_ANY_TAG,
                                                      collective_, &receiving);
                                   }),
                                   step));
  // What goes out: the data in pieces of at most `piece` bytes, the first tagged with the
  // operation and the piece count, or (without data, or after a disagreement) the arguments heard
  // of so far (on the heap: should the send be abandoned, MPI may read it later).
  std::vector<std::byte> arguments;
  std::vector<MPI_Request> sending;
  // A send that is done (a short one leaves at once, eagerly) is not abandoned: only one that
  // MPI may still read stays posted.
  auto abandon_sends = [&] {
    for (MPI_Request& r : sending) {
      int done = 0;
      if (r != MPI_REQUEST_NULL) Locked([&] { return MPI_Test(&r, &done, MPI_STATUS_IGNORE); });
      Abandon(&r, &arguments);
    }
  };
  if (send_to >= 0) {
    std::span<const std::byte> out = std::as_bytes(data);
    size_t piece = exchange_piece_bytes_[send_to];
    if (piece == 0 || piece >= bytes || bytes > kPiecesUpTo)
      piece = std::max<size_t>(bytes, 1);  // one message
    int first_tag = DataTag(op, static_cast<int>(std::max<size_t>((bytes + piece - 1) / piece, 1)));
    if (!with_data || !args->Agree()) {
      arguments.resize(ExchangeArgs::kBytes);
      std::memcpy(arguments.data(), args->lo, sizeof args->lo);
      std::memcpy(arguments.data() + sizeof args->lo, args->hi, sizeof args->hi);
      out = arguments, piece = arguments.size(), first_tag = kArgsTag;
    }
    for (size_t from = 0; from == 0 || from < out.size(); from += piece) {
      const std::span<const std::byte> part = out.subspan(from, std::min(piece, out.size() - from));
      sending.push_back(MPI_REQUEST_NULL);
      Status posted = MpiStatus(
          Locked([&] {
            return MPI_Isend(part.data(), static_cast<int>(part.size()), MPI_BYTE, send_to,
                             from == 0 ? first_tag : kRestTag, collective_, &sending.back());
          }),
          step);
      if (!posted.ok()) {
        Abandon(&receiving, &exchange_scratch_);
        abandon_sends();
        return posted;
      }
    }
  }
  Status s;
  bool fits = false;
  if (receive_from >= 0) {
    MPI_Status status;
    s = Await(&receiving, deadline, step, gone, /*cancellable=*/true, std::chrono::microseconds(0),
              &status);
    // Still posted (not cancelled): MPI may yet write into the scratch, which goes with the
    // request and outlives this communicator (the collectives stop after a failed pass).
    if (!s.ok()) Abandon(&receiving, &exchange_scratch_);
    int count = 0, tag = kArgsTag;
    if (s.ok()) Locked([&] { return MPI_Get_count(&status, MPI_BYTE, &count); });
    if (s.ok()) tag = status.MPI_TAG;
    const bool data_message = tag != kArgsTag;
    const int their_pieces = data_message ? PiecesOf(tag) : 1;
    const int64_t their_op = data_message ? OperationOf(tag) : 0;
    // The sender's other pieces, in order (MPI lets no message from one sender with one tag
    // overtake another), each into place after the one before.
    size_t got = static_cast<size_t>(count);
    for (int i = 1; s.ok() && i < their_pieces; ++i) {
      s = MpiStatus(Locked([&] {
                      return MPI_Irecv(scratch + got, static_cast<int>(kScratchBytes - got),
                                       MPI_BYTE, receive_from, kRestTag, collective_, &receiving);
                    }),
                    step);
      if (s.ok())
        s = Await(&receiving, deadline, step, gone, /*cancellable=*/true,
                  std::chrono::microseconds(0), &status);
      if (!s.ok()) Abandon(&receiving, &exchange_scratch_);
      if (s.ok()) Locked([&] { return MPI_Get_count(&status, MPI_BYTE, &count); });
      got += static_cast<size_t>(count);
    }
    if (s.ok()) {
      // A data message is an AllReduce of its length in floats, with the operation of its tag.
      ExchangeArgs theirs = ExchangeArgs::Of(CollectiveCode("AllReduce"),
                                             static_cast<int64_t>(got / sizeof(float)), their_op);
      if (!data_message && got == ExchangeArgs::kBytes) {
        std::memcpy(theirs.lo, scratch, sizeof theirs.lo);
        std::memcpy(theirs.hi, scratch + sizeof theirs.lo, sizeof theirs.hi);
      } else if (!data_message) {
        s = InternalError(step + ": an arguments message of " + std::to_string(got) +
                          " bytes, expected " + std::to_string(ExchangeArgs::kBytes));
      }
      fits = data_message && with_data && args->Agree() && theirs == *args;
      if (!fits) args->Merge(theirs);
    }
  }
  // The data may change only once MPI is done reading it.
  for (MPI_Request& r : sending) {
    const Status sent = s.ok() ? Await(&r, deadline, step, gone, /*cancellable=*/false) : s;
    if (!sent.ok()) {
      abandon_sends();
      return sent;
    }
  }
  if (s.ok() && fits) {
    const float* theirs = reinterpret_cast<const float*>(scratch);
    if (landing == Landing::kReplace) {
      if (bytes > 0) std::memcpy(data.data(), theirs, bytes);  // an empty span's data() is null
    } else {
      Combine(data.data(), theirs, data.size(), op, /*dst_first=*/rank_ < receive_from);
    }
  }
  return s;
}

}  // namespace reel::mpi
