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

namespace reel::mpi {
namespace {

// Tags on the collective communicator (point-to-point there is used by this pass only): data
// messages are kDataTag + the operation, disagreements kDisagreeTag.
constexpr int kDataTag = 100;
constexpr int kDisagreeTag = 99;

// op(a, b) element-wise into `into`, the lower rank's values first (a), so that both ranks of a
// pair compute bit for bit the same result whatever the operation.
void Combine(std::span<float> into, const float* a, const float* b, ReduceOp op) {
  for (size_t i = 0; i < into.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
        into[i] = a[i] + b[i];
        break;
      case ReduceOp::kMax:
        into[i] = std::max(a[i], b[i]);
        break;
      case ReduceOp::kMin:
        into[i] = std::min(a[i], b[i]);
        break;
    }
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
  exchange_scratch_.resize(data.size());
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
  // What goes out: the data, tagged with the operation, or the disagreement heard of so far (on
  // the heap: should the send be abandoned, MPI may read it later).
  std::vector<std::byte> disagreement;
  MPI_Request sending = MPI_REQUEST_NULL;
  if (send_to >= 0) {
    int code;
    if (args->Agree()) {
      code = MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_FLOAT, send_to,
                       kDataTag + static_cast<int>(op), collective_, &sending);
    } else {
      const int64_t v[4] = {args->min_size, args->max_size, args->min_op, args->max_op};
      disagreement.resize(sizeof v);
      std::memcpy(disagreement.data(), v, sizeof v);
      code = MPI_Isend(disagreement.data(), 4, MPI_INT64_T, send_to, kDisagreeTag, collective_,
                       &sending);
    }
    REEL_RETURN_IF_ERROR(MpiStatus(code, step));
  }
  // What comes in: probed first, so that its size and tag say what it is before it lands.
  Status s;
  bool fits = false;
  if (receive_from >= 0) {
    MPI_Message message;
    MPI_Status status;
    Backoff backoff;
    for (uint32_t polls = 1;; ++polls) {
      int found = 0;
      s = MpiStatus(MPI_Improbe(receive_from, MPI_ANY_TAG, collective_, &found, &message, &status),
                    step);
      if (found || !s.ok()) break;
      if (polls % 64 == 0) s = gone();
      if (s.ok() && Clock::now() >= deadline)
        s = DeadlineExceededError(step + " passed its deadline");
      if (!s.ok()) break;
      backoff.Pause();
    }
    if (s.ok()) {
      const bool data_message = status.MPI_TAG != kDisagreeTag;
      int count = 0;  // in the sender's elements: floats, or the disagreement's four int64
      s = MpiStatus(MPI_Get_count(&status, data_message ? MPI_FLOAT : MPI_INT64_T, &count), step);
      ExchangeArgs theirs{count, count, status.MPI_TAG - kDataTag, status.MPI_TAG - kDataTag};
      fits = data_message && args->Agree() && theirs.min_size == args->min_size &&
             theirs.min_op == args->min_op;
      // A result replaces the data at once (this rank's send of it finished a step before).
      std::vector<std::byte> other;
      void* into = exchange_scratch_.data();
      if (!fits) {
        other.resize(static_cast<size_t>(count) * (data_message ? sizeof(float) : sizeof(int64_t)));
        into = other.data();
      } else if (landing == Landing::kReplace) {
        into = data.data();
      }
      MPI_Request receiving = MPI_REQUEST_NULL;
      if (s.ok())
        s = MpiStatus(
            MPI_Imrecv(into, count, data_message ? MPI_FLOAT : MPI_INT64_T, &message, &receiving),
            step);
      if (s.ok()) s = Await(&receiving, deadline, step, gone, /*cancellable=*/false);
      if (!s.ok()) Abandon(&receiving, &other);
      if (s.ok() && !fits) {
        if (!data_message && count == 4) {
          int64_t v[4];
          std::memcpy(v, other.data(), sizeof v);
          theirs = {v[0], v[1], v[2], v[3]};
        }
        args->Merge(theirs);
      }
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
  if (s.ok() && fits && landing == Landing::kCombine) {
    const bool lower = receive_from < rank_;
    Combine(data, lower ? exchange_scratch_.data() : data.data(),
            lower ? data.data() : exchange_scratch_.data(), op);
  }
  return s;
}

}  // namespace reel::mpi
