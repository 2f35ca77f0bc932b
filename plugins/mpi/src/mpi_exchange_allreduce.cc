// A small AllReduce in one pass of point-to-point messages (mpi_communicator.h): recursive
// doubling, with MPICH's folding when the rank count is not a power of two (the first 2*rem ranks
// pair up, the even one hands its data to the odd one before and takes the result back after).
// This is the algorithm Open MPI itself runs for small allreduces, but each message is posted
// nonblocking and polled against the deadline and for ranks that left, and it carries the
// arguments with it: its size is the sender's element count and its tag the operation, so one pass
// both checks the arguments and moves the data, where the arrival round costs a round trip of its
// own (most of a small allreduce). A rank that sees a disagreement passes a small disagreement
// message on instead of data, so every rank learns it in the same pass and fails with it.
#include <algorithm>
#include <cstring>

#include "mpi_communicator.h"
#include "mpi_runtime.h"
#include "mpi_wait.h"
#include "reel/ring_allreduce.h"

namespace reel::mpi {
namespace {

// Tags on the collective communicator (point-to-point there is used by this pass only): data
// messages are kDataTag + the operation, disagreements kDisagreeTag.
constexpr int kDataTag = 100;
constexpr int kDisagreeTag = 99;
// A receive has room for this many bytes more than its own data: a disagreement message (four
// int64), or another rank's size up to 8 floats larger, arrives whole.
constexpr size_t kSlackBytes = 4 * sizeof(int64_t);

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

// The arguments seen so far: this rank's, widened by every disagreeing one it heard of.
struct MpiCommunicator::ExchangeArgs {
  int64_t min_size, max_size, min_op, max_op;
  bool Agree() const { return min_size == max_size && min_op == max_op; }
  void Merge(const ExchangeArgs& o) {
    min_size = std::min(min_size, o.min_size), max_size = std::max(max_size, o.max_size);
    min_op = std::min(min_op, o.min_op), max_op = std::max(max_op, o.max_op);
  }
};

Status MpiCommunicator::ExchangeAllReduce(std::span<float> data, ReduceOp op, Deadline deadline) {
  REEL_RETURN_IF_ERROR(CollectivesUsable("AllReduce"));
  const std::string what = Where() + ": AllReduce of " + std::to_string(data.size()) + " floats";
  const auto size = static_cast<int64_t>(data.size());
  ExchangeArgs args{size, size, static_cast<int64_t>(op), static_cast<int64_t>(op)};
  exchange_scratch_.resize(data.size() * sizeof(float) + kSlackBytes);
  int pow2 = 1;
  while (pow2 * 2 <= size_) pow2 *= 2;
  const int rem = size_ - pow2;
  auto step = [&](int send_to, int receive_from, Landing landing) {
    return ExchangeStep(send_to, receive_from, landing, data, op, &args, deadline, what);
  };
  Status s;
  if (rank_ < 2 * rem && rank_ % 2 == 0) {  // folded: hands its data over, takes the result back
    s = step(rank_ + 1, -1, Landing::kCombine);
    if (s.ok()) s = step(-1, rank_ + 1, Landing::kReplace);
  } else {
    if (rank_ < 2 * rem) s = step(-1, rank_ - 1, Landing::kCombine);
    const int me = rank_ < 2 * rem ? rank_ / 2 : rank_ - rem;  // among the pow2 that exchange
    for (int mask = 1; s.ok() && mask < pow2; mask <<= 1) {
      const int other = me ^ mask;
      const int peer = other < rem ? other * 2 + 1 : other + rem;
      s = step(peer, peer, Landing::kCombine);
    }
    if (s.ok() && rank_ < 2 * rem) s = step(rank_ - 1, -1, Landing::kCombine);
  }
  if (!s.ok()) {
    // Messages of this pass may still be under way, and a later pass would take them for its
    // own: the collectives of this communicator stop here (mpi_communicator.h).
    collectives_failed_ = "AllReduce failed: " + s.message();
    return s;
  }
  ++collectives_completed_;
  if (args.Agree()) return Status::Ok();
  const bool sizes = args.min_size != args.max_size;
  return InvalidArgumentError(
      what + ": every rank must pass the same " + (sizes ? "size" : "operation") + " (this rank " +
      std::to_string(sizes ? size : static_cast<int64_t>(op)) + ", the ranks between " +
      std::to_string(sizes ? args.min_size : args.min_op) + " and " +
      std::to_string(sizes ? args.max_size : args.max_op) + ")");
}

Status MpiCommunicator::ExchangeStep(int send_to, int receive_from, Landing landing,
                                     std::span<float> data, ReduceOp op, ExchangeArgs* args,
                                     Deadline deadline, const std::string& what) {
  const int peer = send_to >= 0 ? send_to : receive_from;
  const std::string step = what + " (with rank " + std::to_string(peer) + ")";
  auto gone = [&] { return CollectivePeerGone(step); };
  const size_t bytes = data.size() * sizeof(float);
  // The receive first (posted before the peer's message arrives, as MPI's own collectives do):
  // into scratch with room for kSlackBytes more than this rank's data, so that a disagreement,
  // or another size up to that much larger, arrives whole and says what it is.
  MPI_Request receiving = MPI_REQUEST_NULL;
  if (receive_from >= 0)
    REEL_RETURN_IF_ERROR(MpiStatus(
        Locked([&] {
          return MPI_Irecv(exchange_scratch_.data(), static_cast<int>(bytes + kSlackBytes),
                           MPI_BYTE, receive_from, MPI_ANY_TAG, collective_, &receiving);
        }),
        step));
  // What goes out: the data, tagged with the operation, or the disagreement heard of so far (on
  // the heap: should the send be abandoned, MPI may read it later).
  std::vector<std::byte> disagreement;
  MPI_Request sending = MPI_REQUEST_NULL;
  if (send_to >= 0) {
    const void* out = data.data();
    int out_bytes = static_cast<int>(bytes), tag = kDataTag + static_cast<int>(op);
    if (!args->Agree()) {
      const int64_t v[4] = {args->min_size, args->max_size, args->min_op, args->max_op};
      disagreement.resize(sizeof v);
      std::memcpy(disagreement.data(), v, sizeof v);
      out = disagreement.data(), out_bytes = sizeof v, tag = kDisagreeTag;
    }
    Status posted =
        MpiStatus(Locked([&] {
                    return MPI_Isend(out, out_bytes, MPI_BYTE, send_to, tag, collective_, &sending);
                  }),
                  step);
    if (!posted.ok()) {
      Abandon(&receiving, &exchange_scratch_);
      return posted;
    }
  }
  Status s;
  bool fits = false;
  if (receive_from >= 0) {
    MPI_Status status;
    bool truncated = false;
    s = Await(&receiving, deadline, step, gone, /*cancellable=*/true, std::chrono::microseconds(0),
              &status, &truncated);
    // Still posted (not cancelled): MPI may yet write into the scratch, which goes with the
    // request and outlives this communicator (the collectives stop after a failed pass).
    if (!s.ok()) Abandon(&receiving, &exchange_scratch_);
    if (s.ok()) {
      int count = 0;
      Locked([&] { return MPI_Get_count(&status, MPI_BYTE, &count); });
      const bool data_message = status.MPI_TAG != kDisagreeTag;
      ExchangeArgs theirs{count / 4, count / 4, status.MPI_TAG - kDataTag,
                          status.MPI_TAG - kDataTag};
      if (truncated)  // longer than this rank's data by more than the slack: say so
        theirs.min_size = theirs.max_size = static_cast<int64_t>(data.size() + kSlackBytes / 4 + 1);
      if (!data_message && !truncated && count == sizeof(int64_t) * 4) {
        int64_t v[4];
        std::memcpy(v, exchange_scratch_.data(), sizeof v);
        theirs = {v[0], v[1], v[2], v[3]};
      }
      fits = data_message && !truncated && args->Agree() && theirs.min_size == args->min_size &&
             theirs.min_op == args->min_op;
      if (!fits) args->Merge(theirs);
    }
  }
  // The data may change only once MPI is done reading it.
  if (sending != MPI_REQUEST_NULL) {
    const Status sent = s.ok() ? Await(&sending, deadline, step, gone, /*cancellable=*/false) : s;
    if (!sent.ok()) {
      Abandon(&sending, &disagreement);
      return sent;
    }
  }
  if (s.ok() && fits) {
    const float* theirs = reinterpret_cast<const float*>(exchange_scratch_.data());
    if (landing == Landing::kReplace) {
      if (bytes > 0) std::memcpy(data.data(), theirs, bytes);  // an empty span's data() is null
    } else {
      Combine(data.data(), theirs, data.size(), op, /*dst_first=*/rank_ < receive_from);
    }
  }
  return s;
}

}  // namespace reel::mpi
