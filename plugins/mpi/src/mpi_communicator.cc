// The mpi Communicator's lifecycle and point-to-point messages (collectives: mpi_collectives.cc).
#include "mpi_communicator.h"

#include <climits>
#include <cstring>

#include "mpi_leave.h"
#include "mpi_runtime.h"
#include "mpi_wait.h"

namespace reel::mpi {
namespace {

// MPI counts are ints; bigger messages would need derived datatypes, which no caller needs yet.
constexpr size_t kMaxMessageBytes = INT_MAX;

std::string SourceName(int source) {
  return source == kAnySource ? std::string("any rank") : "rank " + std::to_string(source);
}

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MpiOptions options) : options_(options) {}
  Result<std::unique_ptr<Communicator>> Connect(const TransportContext& ctx,
                                                Deadline deadline) override {
    return MpiCommunicator::Connect(options_, ctx, deadline);
  }

 private:
  const MpiOptions options_;
};

}  // namespace

OptionSchema MpiOptionSchema() {
  return {BoolOption("polled_allreduce", false,
                     "AllReduce as one MPI_Iallreduce polled against its deadline, without the "
                     "round that first checks every rank arrived with the same size (as in raw "
                     "MPI, ranks must agree on it)"),
          BoolOption("blocking_allreduce", false,
                     "AllReduce as the bare blocking MPI_Allreduce on the caller's memory, as "
                     "raw MPI: no arrival check, no polling; ranks must agree on size and "
                     "operation, and a call past its deadline aborts the MPI job (a watchdog "
                     "thread keeps the deadline)"),
          StringOption("thread_level", "multiple",
                       "MPI's thread level: 'multiple' (MPI_THREAD_MULTIPLE) or 'serialized' "
                       "(MPI_THREAD_SERIALIZED, cheaper in Open MPI: the transport holds one "
                       "process-wide lock around each MPI call, and a blocking AllReduce holds it "
                       "throughout; for hosts that communicate from one thread). One level per "
                       "process: MPI is initialised once")};
}

Status CheckMpiOptions(const MpiOptions& o) {
  if (o.polled_allreduce && o.blocking_allreduce)
    return InvalidArgumentError(
        "mpi options 'polled_allreduce' and 'blocking_allreduce' exclude each other (AllReduce "
        "is either polled or blocking): set at most one");
  return Status::Ok();
}

Result<MpiOptions> MpiOptionsFrom(const Options& options) {
  REEL_ASSIGN_OR_RETURN(ThreadLevel level, ParseThreadLevel(options.GetString("thread_level")));
  MpiOptions o{.polled_allreduce = options.GetBool("polled_allreduce"),
               .blocking_allreduce = options.GetBool("blocking_allreduce"),
               .thread_level = level};
  REEL_RETURN_IF_ERROR(CheckMpiOptions(o));
  return o;
}

std::unique_ptr<Transport> MakeMpiTransport(MpiOptions options) {
  return std::make_unique<MpiTransport>(options);
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::Connect(const MpiOptions& options,
                                                               const TransportContext& ctx,
                                                               Deadline deadline) {
  REEL_RETURN_IF_ERROR(CheckMpiOptions(options));
  REEL_RETURN_IF_ERROR(EnsureInitialized(options.thread_level));
  int rank = 0, size = 0;
  REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] { return MPI_Comm_rank(MPI_COMM_WORLD, &rank); }),
                                 "mpi: MPI_Comm_rank"));
  REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] { return MPI_Comm_size(MPI_COMM_WORLD, &size); }),
                                 "mpi: MPI_Comm_size"));
  if (ctx.rank != kDiscover && ctx.rank != rank)
    return InvalidArgumentError("mpi: the host says this process is rank " +
                                std::to_string(ctx.rank) + ", MPI says rank " +
                                std::to_string(rank) + " (leave the rank to MPI under mpirun)");
  if (ctx.world_size != kDiscover && ctx.world_size != size)
    return InvalidArgumentError("mpi rank " + std::to_string(rank) +
                                ": the host says the world has " + std::to_string(ctx.world_size) +
                                " ranks, MPI says " + std::to_string(size));
  int* tag_ub = nullptr;
  int found = 0;
  REEL_RETURN_IF_ERROR(MpiStatus(
      Locked([&] { return MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found); }),
      "mpi: MPI_TAG_UB"));
  if (!found || *tag_ub < kMaxTag)
    return FailedPreconditionError("mpi: this MPI library's largest tag is " +
                                   std::to_string(found ? *tag_ub : 0) + ", reel needs " +
                                   std::to_string(kMaxTag));
  // Threads of one process must not duplicate the same communicator at once.
  static std::mutex connect_mu;
  static int64_t generation = 0;  // communicators formed so far; guarded by connect_mu
  std::lock_guard<std::mutex> lock(connect_mu);
  const std::string what = "mpi rank " + std::to_string(rank) + ": Connect";
  REEL_RETURN_IF_ERROR(EnsureLeaveChannel(rank, deadline));
  REEL_ASSIGN_OR_RETURN(MPI_Comm user, DuplicateWorld(what, deadline));
  REEL_ASSIGN_OR_RETURN(MPI_Comm collective, DuplicateWorld(what, deadline));
  REEL_ASSIGN_OR_RETURN(std::vector<bool> on_this_node,
                        RanksOnThisNode(collective, what, deadline));
  return std::unique_ptr<Communicator>(new MpiCommunicator(
      options, rank, size, ++generation, user, collective, ExchangePieceBytes(on_this_node)));
}

MpiCommunicator::MpiCommunicator(const MpiOptions& options, int rank, int size, int64_t generation,
                                 MPI_Comm user, MPI_Comm collective,
                                 std::vector<size_t> exchange_piece_bytes)
    : options_(options),
      rank_(rank),
      size_(size),
      generation_(generation),
      user_(user),
      collective_(collective),
      exchange_piece_bytes_(std::move(exchange_piece_bytes)),
      watchdog_(rank) {}

MpiCommunicator::~MpiCommunicator() {
  if (Finalized()) return;  // MPI is gone; so are the peers' means to hear from us
  {
    std::lock_guard<std::mutex> lock(mu_);
    SendLeaveNotices(generation_, rank_, size_, collectives_completed_, sent_);
    // Abandoned operations keep their memory: MPI may still touch it (see the header).
    // (Moving a vector moves its pointer, not its bytes: MPI's address stays.)
    for (Abandoned& a : abandoned_)
      KeepForTheProcess(std::make_shared<std::vector<std::byte>>(std::move(a.buffer)));
  }
  ForgetLeftRanks(generation_);
  // user_ and collective_ are not freed (see the header).
}

Status MpiCommunicator::PeerGone(int peer, const std::string& what) {
  if (!LeftRanks(generation_).count(peer)) return Status::Ok();
  return UnavailableError(what + ": rank " + std::to_string(peer) + " has left the group");
}

Status MpiCommunicator::CollectivePeerGone(const std::string& what) {
  // Ranks that left after completing this collective did their part; the rest never will.
  std::vector<int> gone;
  for (const auto& [r, left] : LeftRanks(generation_))
    if (left.collectives_completed <= collectives_completed_) gone.push_back(r);
  if (gone.empty()) return Status::Ok();
  std::string ranks;
  for (int r : gone) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return UnavailableError(what + (gone.size() == 1 ? ": rank " : ": ranks ") + ranks +
                          (gone.size() == 1 ? " has" : " have") + " left the group");
}

Status MpiCommunicator::SenderGone(int source, int tag, const std::string& what) {
  const std::map<int, LeftRank> left = LeftRanks(generation_);
  std::lock_guard<std::mutex> lock(mu_);
  // A rank that left is gone for this receive once we hold everything it sent with this tag.
  auto drained = [&](int r) {
    auto it = left.find(r);
    if (it == left.end()) return false;
    auto sent = it->second.sent.find(tag);
    const int64_t expected = sent == it->second.sent.end() ? 0 : sent->second;
    auto got = received_.find({r, tag});
    return (got == received_.end() ? 0 : got->second) >= expected;
  };
  if (source != kAnySource)
    return drained(source)
               ? UnavailableError(what + ": rank " + std::to_string(source) + " has left the group")
               : Status::Ok();
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && !drained(r)) return Status::Ok();
  if (size_ == 1) return Status::Ok();  // a receive from oneself may still be satisfied
  return UnavailableError(what + ": every other rank has left the group");
}

Status MpiCommunicator::Await(MPI_Request* request, Deadline deadline, const std::string& what,
                              const std::function<Status()>& gone, bool cancellable,
                              std::chrono::microseconds spin_for, MPI_Status* status) {
  Backoff backoff(spin_for);
  Status failure;
  for (uint32_t polls = 1;; ++polls) {
    int done = 0, code = MPI_SUCCESS;
    {
      // Held per poll, never across the pause: under thread_level=serialized the other threads'
      // calls (the send this receive waits for may be one of them) get their turn.
      MpiLock lock;
      code = MPI_Test(request, &done, status);
    }
    if (code != MPI_SUCCESS) return MpiStatus(code, what);
    if (done) return Status::Ok();
    if (polls % 64 == 0) failure = gone();  // leave notices are rare; do not probe for them often
    if (failure.ok() && Clock::now() >= deadline)
      failure = DeadlineExceededError(what + " passed its deadline");
    if (!failure.ok()) break;
    backoff.Pause();
  }
  if (!cancellable) return failure;
  // Take the operation back if MPI can; otherwise it stays posted (*request stays set).
  MPI_Status last;
  int done = 0, cancelled = 0;
  {
    MpiLock lock;
    MPI_Cancel(request);
    MPI_Test(request, &done, &last);
    if (done) MPI_Test_cancelled(&last, &cancelled);
  }
  if (!done || cancelled) return failure;
  if (status != MPI_STATUS_IGNORE) *status = last;
  return Status::Ok();  // not cancelled: it finished after all
}

void MpiCommunicator::Abandon(MPI_Request* request, std::vector<std::byte>* owned) {
  if (*request == MPI_REQUEST_NULL) return;
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_.push_back({*request, owned ? std::move(*owned) : std::vector<std::byte>{}});
  *request = MPI_REQUEST_NULL;
}

size_t MpiCommunicator::AbandonedCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return abandoned_.size();
}

Status MpiCommunicator::CheckPeer(int peer, const char* what, bool any_allowed) const {
  if ((any_allowed && peer == kAnySource) || (peer >= 0 && peer < size_)) return Status::Ok();
  return InvalidArgumentError(Where() + ": " + what + " rank " + std::to_string(peer) +
                              " outside [0, " + std::to_string(size_) + ")");
}

Status MpiCommunicator::CheckTag(int tag, const char* what) const {
  if (tag >= 0 && tag <= kMaxTag) return Status::Ok();
  return InvalidArgumentError(Where() + ": " + what + " with tag " + std::to_string(tag) +
                              " outside [0, " + std::to_string(kMaxTag) + "]");
}

Status MpiCommunicator::Send(int dest, int tag, std::span<const std::byte> data,
                             Deadline deadline) {
  REEL_RETURN_IF_ERROR(CheckPeer(dest, "Send to", false));
  REEL_RETURN_IF_ERROR(CheckTag(tag, "Send"));
  const std::string what =
      Where() + ": Send to rank " + std::to_string(dest) + " tag " + std::to_string(tag);
  if (data.size() > kMaxMessageBytes)
    return InvalidArgumentError(what + ": " + std::to_string(data.size()) +
                                " bytes is more than an MPI message carries (" +
                                std::to_string(kMaxMessageBytes) + ")");
  REEL_RETURN_IF_ERROR(PeerGone(dest, what));
  MPI_Request request;
  REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] {
                                   return MPI_Isend(data.data(), static_cast<int>(data.size()),
                                                    MPI_BYTE, dest, tag, user_, &request);
                                 }),
                                 what));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++sent_[{dest, tag}];  // counted when posted: a leave notice must cover it
  }
  Status sent = Await(
      &request, deadline, what, [&] { return PeerGone(dest, what); }, true);
  if (!sent.ok() && request == MPI_REQUEST_NULL) {
    std::lock_guard<std::mutex> lock(mu_);
    --sent_[{dest, tag}];  // cancelled: it will never arrive
  }
  Abandon(&request, nullptr);
  return sent;
}

Result<MpiCommunicator::Probed> MpiCommunicator::Probe(int source, int tag, Deadline deadline) {
  REEL_RETURN_IF_ERROR(CheckPeer(source, "Recv from", true));
  REEL_RETURN_IF_ERROR(CheckTag(tag, "Recv"));
  Probed p;
  p.what = Where() + ": Recv from " + SourceName(source) + " tag " + std::to_string(tag);
  const int mpi_source = source == kAnySource ? MPI_ANY_SOURCE : source;
  auto probe = [&](int* flag) {
    return MpiStatus(
        Locked([&] { return MPI_Improbe(mpi_source, tag, user_, flag, &p.message, &p.status); }),
        p.what);
  };
  Backoff backoff;
  for (uint32_t polls = 1;; ++polls) {
    int flag = 0;
    REEL_RETURN_IF_ERROR(probe(&flag));
    if (!flag && polls % 64 == 0) REEL_RETURN_IF_ERROR(SenderGone(source, tag, p.what));
    if (!flag && Clock::now() >= deadline) {
      // The last look: a message that arrived meanwhile is still delivered.
      REEL_RETURN_IF_ERROR(probe(&flag));
      if (!flag) return DeadlineExceededError(p.what + " passed its deadline");
    }
    if (flag) {
      int bytes = 0;
      Locked([&] { return MPI_Get_count(&p.status, MPI_BYTE, &bytes); });
      p.bytes = static_cast<size_t>(bytes);
      return p;
    }
    backoff.Pause();
  }
}

Status MpiCommunicator::ReceiveProbed(Probed& p, std::span<std::byte> into, Deadline deadline,
                                      std::vector<std::byte>* owned) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++received_[{p.status.MPI_SOURCE, p.status.MPI_TAG}];
  }
  MPI_Request request;
  REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] {
                                   return MPI_Imrecv(into.data(), static_cast<int>(into.size()),
                                                     MPI_BYTE, &p.message, &request);
                                 }),
                                 p.what));
  const int source = p.status.MPI_SOURCE;
  Status received = Await(
      &request, deadline, p.what, [&] { return PeerGone(source, p.what); }, true);
  if (!received.ok()) Abandon(&request, owned);
  return received;
}

Result<Message> MpiCommunicator::Recv(int source, int tag, Deadline deadline) {
  REEL_ASSIGN_OR_RETURN(Probed p, Probe(source, tag, deadline));
  Message out{p.status.MPI_SOURCE, tag, std::vector<std::byte>(p.bytes)};
  // Should the receive be abandoned, the payload's memory goes with it (moving a vector keeps
  // its heap block, which MPI may still write).
  REEL_RETURN_IF_ERROR(ReceiveProbed(p, out.payload, deadline, &out.payload));
  return out;
}

Status MpiCommunicator::RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) {
  REEL_ASSIGN_OR_RETURN(Probed p, Probe(source, tag, deadline));
  if (p.bytes == out.size()) return ReceiveProbed(p, out, deadline, nullptr);
  // The wrong size: take the message off the queue (as every transport does), then say so.
  std::vector<std::byte> discard(p.bytes);
  REEL_RETURN_IF_ERROR(ReceiveProbed(p, discard, deadline, &discard));
  return InvalidArgumentError(
      p.what + ": the message from rank " + std::to_string(p.status.MPI_SOURCE) + " has " +
      std::to_string(p.bytes) + " bytes, expected " + std::to_string(out.size()));
}

}  // namespace reel::mpi
