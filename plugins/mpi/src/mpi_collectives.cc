// The mpi Communicator's collectives: every rank first agrees on arrival and arguments (polled,
// so the deadline holds), then the blocking native MPI call moves the data; or, for a polled
// AllReduce, the one nonblocking native call (mpi_communicator.h).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>

#include "mpi_communicator.h"
#include "mpi_runtime.h"
#include "mpi_wait.h"

namespace reel::mpi {
namespace {

// MPI counts are ints: longer buffers go in pieces of this many elements (alike on every rank).
constexpr size_t kMaxPiece = size_t{1} << 30;

// A polled AllReduce spins this long before it yields (mpi_wait.h): about as long as a large
// allreduce takes on a loaded machine.
constexpr std::chrono::microseconds kSpinForData{1000000};

MPI_Op MpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

}  // namespace

// The collectives that agree on arrival, by number: word 0 of the arguments (ExchangeArgs).
constexpr const char* kAgreeingCollectives[] = {"AllReduce", "Broadcast", "AllGather"};

int64_t CollectiveCode(const char* name) {
  for (size_t i = 0; i < std::size(kAgreeingCollectives); ++i)
    if (std::strcmp(name, kAgreeingCollectives[i]) == 0) return static_cast<int64_t>(i) + 1;
  return 0;
}

std::string CollectiveName(int64_t code) {
  if (code >= 1 && code <= static_cast<int64_t>(std::size(kAgreeingCollectives)))
    return kAgreeingCollectives[code - 1];
  return "collective " + std::to_string(code);
}

Status MpiCommunicator::CollectivesUsable(const char* collective) {
  if (late_collective_) {  // the late ranks may have arrived meanwhile
    int done = 0;
    if (Locked([&] { return MPI_Test(&*late_collective_, &done, MPI_STATUS_IGNORE); }) ==
            MPI_SUCCESS &&
        done) {
      late_collective_.reset();
      if (std::exchange(late_noted_, false)) NoteAbandonedCollectiveCompleted();
      collectives_failed_.clear();
      ++collectives_completed_;
    }
  }
  if (collectives_failed_.empty()) return Status::Ok();
  return FailedPreconditionError(Where() + ": " + collective +
                                 ": this communicator's collectives "
                                 "are unusable since " +
                                 collectives_failed_ +
                                 " (MPI cannot take a rank's part in a collective back; connect a "
                                 "new communicator)");
}

// The exchange pass without data (mpi_exchange_allreduce.cc): on 2 ranks one message each way,
// beyond that recursive doubling. A small AllReduce's pass meets it, so ranks whose AllReduce
// sizes fall on both sides of kExchangeBelowBytes learn that they disagree too.
Status MpiCommunicator::Agree(const char* collective, const std::vector<NamedArg>& args,
                              Deadline deadline) {
  REEL_RETURN_IF_ERROR(CollectivesUsable(collective));
  const std::string what = Where() + ": " + collective;
  if (args.size() > ExchangeArgs::kWords - 1)
    return InternalError(what + ": too many arguments to agree on");
  ExchangeArgs all = ExchangeArgs::Of(CollectiveCode(collective), args.empty() ? 0 : args[0].value,
                                      args.size() < 2 ? 0 : args[1].value);
  const size_t abandoned_before = AbandonedCount();
  Status arrived = ExchangePass({}, ReduceOp::kSum, /*with_data=*/false, &all, deadline,
                                what + " (waiting for every rank to arrive)");
  if (!arrived.ok()) {
    // A peer that heard this rank's arrival may go on into the native call and wait there for
    // this rank, which never comes: as for any abandoned collective, MPI must not be finalised
    // at exit, so that mpirun ends the job instead of leaving the peer stuck. Not so when the
    // only peer left and nothing of the pass stays posted: then MPI can finalise.
    if (size_ > 2 || arrived.code() != StatusCode::kUnavailable ||
        AbandonedCount() > abandoned_before)
      NoteAbandonedCollective();
    collectives_failed_ = std::string(collective) + " failed: " + arrived.message();
    return arrived;
  }
  ++collectives_completed_;
  if (all.Agree()) return Status::Ok();
  return Disagreement(what, collective, args, all);
}

Status MpiCommunicator::Disagreement(const std::string& what, const char* collective,
                                     const std::vector<NamedArg>& args,
                                     const ExchangeArgs& all) const {
  if (all.lo[0] != all.hi[0])
    return InvalidArgumentError(what +
                                ": every rank must call the same collectives in the same "
                                "order (this rank " +
                                collective + ", the others " + CollectiveName(all.lo[0]) + " to " +
                                CollectiveName(all.hi[0]) + ")");
  for (size_t i = 0; i < args.size(); ++i)
    if (all.lo[1 + i] != all.hi[1 + i])
      return InvalidArgumentError(what + ": every rank must pass the same " + args[i].name +
                                  " (this rank " + std::to_string(args[i].value) +
                                  ", the ranks between " + std::to_string(all.lo[1 + i]) + " and " +
                                  std::to_string(all.hi[1 + i]) + ")");
  return InternalError(what + ": the ranks disagree about an argument this rank does not pass");
}

Status MpiCommunicator::AllReduce(std::span<float> data, ReduceOp op, Deadline deadline) {
  if (options_.blocking_allreduce) return BlockingAllReduce(data, op, deadline);
  if (options_.polled_allreduce) return PolledAllReduce(data, op, deadline);
  if (data.size() * sizeof(float) < kExchangeBelowBytes)
    return ExchangeAllReduce(data, op, deadline);
  REEL_RETURN_IF_ERROR(
      Agree("AllReduce",
            {{"size", static_cast<int64_t>(data.size())}, {"operation", static_cast<int64_t>(op)}},
            deadline));
  // Every rank has arrived, so no late rank holds this up; a rank stopped or lost from here on
  // is caught by the watchdog. Under thread_level=serialized the other threads' MPI calls wait
  // for it (mpi_runtime.h).
  Watched watched(watchdog_, deadline, "AllReduce", data.size(), "floats");
  for (size_t at = 0; at < data.size(); at += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, data.size() - at));
    REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] {
                                     return MPI_Allreduce(MPI_IN_PLACE, data.data() + at, n,
                                                          MPI_FLOAT, MpiOp(op), collective_);
                                   }),
                                   Where() + ": AllReduce"));
  }
  return Status::Ok();
}

// No arrival round (mpi_communicator.h): the data moves in the one nonblocking native call,
// polled against the deadline.
Status MpiCommunicator::PolledAllReduce(std::span<float> data, ReduceOp op, Deadline deadline) {
  REEL_RETURN_IF_ERROR(CollectivesUsable("AllReduce"));
  const std::string what = Where() + ": AllReduce of " + std::to_string(data.size()) + " floats";
  // At least one call, also for no data: every rank takes part in every collective.
  for (size_t at = 0; at == 0 || at < data.size(); at += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, data.size() - at));
    MPI_Request request;
    REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] {
                                     return MPI_Iallreduce(MPI_IN_PLACE, data.data() + at, n,
                                                           MPI_FLOAT, MpiOp(op), collective_,
                                                           &request);
                                   }),
                                   what));
    Status done = Await(
        &request, deadline, what + " (waiting for every rank)",
        [&] { return CollectivePeerGone(what); }, /*cancellable=*/false, kSpinForData);
    if (!done.ok()) {
      // Still posted: complete (and usable again) once the late ranks arrive, if they do; till
      // then MPI may write `data`, the caller's memory, as after a RecvInto past its deadline.
      collectives_failed_ = "AllReduce failed: " + done.message();
      if (at + static_cast<size_t>(n) < data.size()) {  // later pieces never started: stuck
        NoteAbandonedCollective();
        Abandon(&request, nullptr);
        return done;
      }
      late_collective_ = request;
      late_noted_ = true;
      NoteAbandonedCollective();
      return done;
    }
  }
  ++collectives_completed_;
  return Status::Ok();
}

// The bare native call on the caller's memory (mpi_communicator.h): no arrival round, no argument
// check, no polling; the watchdog keeps the deadline at the cost of a few relaxed stores per call.
// A peer that left is not looked for (that takes an MPI call): the deadline catches it. Under
// thread_level=serialized the call holds MpiLock until every rank has arrived, and the other
// threads' MPI calls wait that long (mpi_runtime.h); the watchdog does not take it.
Status MpiCommunicator::BlockingAllReduce(std::span<float> data, ReduceOp op, Deadline deadline) {
  // No MPI call unless a timed-out Barrier may have completed since (late_collective_).
  REEL_RETURN_IF_ERROR(CollectivesUsable("AllReduce"));
  int code = MPI_SUCCESS;
  Watched watched(watchdog_, deadline, "AllReduce", data.size(), "floats");
  // At least one call, also for no data: every rank takes part in every collective.
  for (size_t at = 0; code == MPI_SUCCESS && (at == 0 || at < data.size()); at += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, data.size() - at));
    code = Locked([&] {
      return MPI_Allreduce(MPI_IN_PLACE, data.data() + at, n, MPI_FLOAT, MpiOp(op), collective_);
    });
  }
  if (code != MPI_SUCCESS)
    return MpiStatus(code, Where() + ": AllReduce of " + std::to_string(data.size()) + " floats");
  ++collectives_completed_;
  return Status::Ok();
}

// A root outside the group is refused after the agreement, so that every rank refuses it (a rank
// refusing alone would leave the others waiting in the agreement until their deadline).
Status MpiCommunicator::Broadcast(std::span<std::byte> data, int root, Deadline deadline) {
  REEL_RETURN_IF_ERROR(
      Agree("Broadcast", {{"size", static_cast<int64_t>(data.size())}, {"root", root}}, deadline));
  if (root < 0 || root >= size_)
    return InvalidArgumentError(Where() + ": Broadcast from root " + std::to_string(root) +
                                " outside [0, " + std::to_string(size_) + ")");
  Watched watched(watchdog_, deadline, "Broadcast", data.size(), "bytes");
  for (size_t at = 0; at < data.size(); at += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, data.size() - at));
    REEL_RETURN_IF_ERROR(MpiStatus(
        Locked([&] { return MPI_Bcast(data.data() + at, n, MPI_BYTE, root, collective_); }),
        Where() + ": Broadcast from root " + std::to_string(root)));
  }
  return Status::Ok();
}

// As Broadcast's root, a wrong output is refused after the agreement, in which it counts as an
// argument: a rank with a wrong output among ranks without one is a disagreement.
Status MpiCommunicator::AllGather(std::span<const std::byte> in, std::span<std::byte> out,
                                  Deadline deadline) {
  const bool out_fits = out.size() == in.size() * static_cast<size_t>(size_);
  REEL_RETURN_IF_ERROR(Agree("AllGather",
                             {{"size", static_cast<int64_t>(in.size())},
                              {"output size (1: n x size, 0: another)", out_fits ? 1 : 0}},
                             deadline));
  if (!out_fits)
    return InvalidArgumentError(Where() + ": AllGather of " + std::to_string(in.size()) +
                                " bytes per rank needs " +
                                std::to_string(in.size() * static_cast<size_t>(size_)) +
                                " output bytes, got " + std::to_string(out.size()));
  if (in.size() > kMaxPiece)  // pieces would interleave the ranks' blocks wrongly
    return InvalidArgumentError(Where() + ": AllGather of " + std::to_string(in.size()) +
                                " bytes per rank: at most " + std::to_string(kMaxPiece));
  const int n = static_cast<int>(in.size());
  Watched watched(watchdog_, deadline, "AllGather", in.size(), "bytes per rank");
  return MpiStatus(Locked([&] {
                     return MPI_Allgather(in.data(), n, MPI_BYTE, out.data(), n, MPI_BYTE,
                                          collective_);
                   }),
                   Where() + ": AllGather");
}

Status MpiCommunicator::Barrier(Deadline deadline) {
  REEL_RETURN_IF_ERROR(CollectivesUsable("Barrier"));
  const std::string what = Where() + ": Barrier";
  MPI_Request request;
  REEL_RETURN_IF_ERROR(
      MpiStatus(Locked([&] { return MPI_Ibarrier(collective_, &request); }), what));
  Status arrived = Await(
      &request, deadline, what + " (waiting for every rank to arrive)",
      [&] { return CollectivePeerGone(what); }, /*cancellable=*/false);
  if (!arrived.ok()) {
    // No data phase: once the late ranks arrive it is complete (CollectivesUsable checks).
    late_collective_ = request;
    collectives_failed_ = "Barrier failed: " + arrived.message();
    return arrived;
  }
  ++collectives_completed_;
  return Status::Ok();
}

}  // namespace reel::mpi
