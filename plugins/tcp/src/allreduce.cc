// The tcp group's native AllReduce: a ring (reduce-scatter, then allgather) whose calling thread
// drives both of its connections in one poll loop, as Open MPI's and Gloo's TCP paths do. Each
// turn of the loop posts the receives that have room, reads what the left neighbour's connection
// has (frames of other tags, heartbeats and notices go to the Mailbox as the io thread would
// deliver them), reduces what arrived, and writes what the right neighbour may have next; it
// sleeps in poll() only when none of that moved. No thread hand-off per chunk: with one thread
// per rank busy, a 2-core machine runs two ranks without a context switch per message. While
// it polls, the connection it reads reports readiness to nobody (read_readiness.h), so that the
// io thread, which cannot read a borrowed connection, is not woken for it either.
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "reel/collective_agreement.h"
#include "reel/ring_allreduce.h"
#include "tcp_communicator.h"

namespace reel::tcp {
namespace {

using boost::system::error_code;

size_t RingPosition(const std::vector<int>& ring, int rank) {
  return static_cast<size_t>(std::find(ring.begin(), ring.end(), rank) - ring.begin());
}

}  // namespace

// One call, on the core ring's schedule (reel/ring_allreduce.h): reduce-scatter chunks arrive in
// kSlots scratch slots, allgather chunks straight into the caller's buffer once the send from the
// same place is done. The first message carries the sender's element count, so ranks that disagree
// about the size fail instead of exchanging chunks that happen to fit.
class TcpCommunicator::RingAllReduce {
 public:
  // Large enough that a message's fixed costs vanish, small enough that 1 MiB pipelines.
  static constexpr size_t kChunkBytes = size_t{256} << 10;
  static constexpr int64_t kSlots = 4;  // receives posted ahead
  static constexpr size_t kCountFloats = sizeof(uint64_t) / sizeof(float);

  // Over `ring` (the ranks in ring order, this one among them, at least 2).
  RingAllReduce(TcpCommunicator& comm, const std::vector<int>& ring, std::span<float> data,
                ReduceOp op, uint32_t seq, Deadline deadline)
      : comm_(comm),
        mailbox_(comm.mailbox_),
        data_(data),
        op_(op),
        seq_(seq & kCollectiveSeqMask),
        tag_(Mailbox::CollectiveTag(seq)),
        deadline_(deadline),
        spin_(comm.AllReduceSpin()),
        yield_(comm.AllReduceYield()),
        n_(ring.size()),
        r_(RingPosition(ring, comm.rank_)),
        left_(*comm.peers_[static_cast<size_t>(ring[(r_ + n_ - 1) % n_])]),
        right_(*comm.peers_[static_cast<size_t>(ring[(r_ + 1) % n_])]),
        schedule_(data.size(), static_cast<int>(n_), static_cast<int>(r_), kChunkBytes),
        chunks_(schedule_.chunks()),
        units_(schedule_.units()),
        slot_floats_(schedule_.max_chunk()),
        write_(right_.write_mu, std::defer_lock) {
    std::vector<float>& scratch = comm.allreduce_scratch_;
    const size_t need = static_cast<size_t>(kSlots) * SlotStride();
    if (scratch.size() < need) scratch.resize(need);
    scratch_ = std::span<float>(scratch).first(need);
  }

  // REQUIRES: the left neighbour's connection borrowed. Leaves nothing behind: no receive
  // posted, no frame half written unless the connection is marked broken.
  Status Run() {
    Status s = Loop();
    if (s.code() == StatusCode::kInvalidArgument) SendFirstStep();
    Finish(s);
    return s;
  }

 private:
  // With allreduce_spin, a turn that moved nothing is followed by another at once (the checks of
  // Wait() still made) until nothing has moved for that long; only then does it sleep.
  Status Loop() {
    Deadline idle_since = Deadline::max();  // since when nothing moved; max while it moves
    while (reduced_ < units_ || sent_ < units_) {
      bool moved = Post();
      Read(&moved);
      REEL_RETURN_IF_ERROR(Collect(&moved));
      REEL_RETURN_IF_ERROR(Write(&moved));
      if (moved) {
        idle_since = Deadline::max();
        continue;
      }
      const Deadline now = Clock::now();
      if (idle_since == Deadline::max()) idle_since = now;
      REEL_RETURN_IF_ERROR(Wait(/*reading=*/true, now - idle_since >= spin_));
    }
    return Status::Ok();
  }

  // After a size disagreement: the rest of the first step still goes (it depends on nothing
  // received), with the count, so that the right neighbour fails on it at once instead of
  // waiting for it until its deadline.
  void SendFirstStep() {
    send_limit_ = std::min<int64_t>(units_, static_cast<int64_t>(chunks_));
    while (write_.owns_lock() || sent_ < send_limit_) {
      bool moved = false;
      if (!Write(&moved).ok()) return;
      if (!moved && !Wait(/*reading=*/false).ok()) return;
    }
  }

  bool Reducing(int64_t u) const { return schedule_.Reducing(u); }
  // The part of the caller's buffer that unit `u` sends (or, allgathering, receives into).
  std::span<float> Chunk(int64_t u, bool sent) const { return schedule_.Chunk(data_, u, sent); }
  // A received reduce-scatter chunk, with room for the count after it.
  size_t SlotStride() const { return slot_floats_ + kCountFloats; }
  std::span<float> Slot(int64_t u) const {
    return scratch_.subspan(static_cast<size_t>(u % kSlots) * SlotStride(), SlotStride());
  }
  Mailbox::Posted& Receive(int64_t u) { return posted_[static_cast<size_t>(u % kSlots)]; }

  // Posts the receives that have room: a free slot, and for an allgather chunk the send from
  // the same place done (the peer cannot have the final value before, but no race detector
  // has to rely on that).
  bool Post() {
    bool moved = false;
    while (posted_up_to_ < units_ && posted_up_to_ - reduced_ < kSlots) {
      const int64_t u = posted_up_to_;
      std::span<float> into = Chunk(u, /*sent=*/false);
      if (Reducing(u)) {
        into = Slot(u).first(into.size() + (u == 0 ? kCountFloats : 0));
      } else if (sent_ <= schedule_.SentFromSamePlace(u)) {
        break;
      }
      Mailbox::Posted& p = Receive(u);
      p = Mailbox::Posted{};
      p.source = static_cast<int>(left_.rank);
      p.tag = tag_;
      p.out = std::as_writable_bytes(into);
      mailbox_.Post(p);
      ++posted_up_to_;
      moved = true;
    }
    return moved;
  }

  // Reads once from the left neighbour's connection, if a receive waits for it.
  void Read(bool* moved) {
    if (reduced_ == posted_up_to_) return;
    // An end (a goodbye, a broken connection) is recorded and reported by ReadOnce; the
    // receives then end with it (a claimed receive's status, or Wait()).
    const ReadResult r = comm_.ReadOnce(left_);
    if (r == ReadResult::kGot) *moved = true;
    left_held_back_ = r == ReadResult::kFull;
  }

  // Reduces the receives that are done, in order.
  Status Collect(bool* moved) {
    while (reduced_ < posted_up_to_ && mailbox_.Done(Receive(reduced_))) {
      const int64_t u = reduced_;
      Status s = Receive(u).status;
      const size_t floats = Chunk(u, false).size();
      if (s.code() == StatusCode::kInvalidArgument)
        s = s.WithContext("chunk of " + std::to_string(floats) +
                          " floats (do all ranks pass the same size?)");
      if (s.ok() && u == 0) {
        uint64_t count;
        std::memcpy(&count, Slot(0).data() + floats, sizeof count);
        if (count != data_.size())
          s = InvalidArgumentError("rank " + std::to_string(left_.rank) + " reduces " +
                                   std::to_string(count) + " floats, this rank " +
                                   std::to_string(data_.size()) +
                                   " (do all ranks pass the same size?)");
      }
      ++reduced_;  // done either way: nothing is posted for it any more
      REEL_RETURN_IF_ERROR(s);
      if (Reducing(u)) ring::Reduce(Chunk(u, false).data(), Slot(u).data(), floats, op_);
      *moved = true;
    }
    return Status::Ok();
  }

  // Writes to the right neighbour until its socket is full or no unit is ready. The connection
  // is locked while a frame is under way only, so heartbeats and notices still get through.
  Status Write(bool* moved) {
    while (true) {
      if (!write_.owns_lock()) {
        const int64_t u = sent_;
        if (u == send_limit_ || (u >= static_cast<int64_t>(chunks_) &&
                                 reduced_ < u - static_cast<int64_t>(chunks_) + 1))
          return Status::Ok();
        REEL_RETURN_IF_ERROR(StartFrame(u));
        if (!write_.owns_lock()) return Status::Ok();  // a sender holds it: next turn
      }
      error_code ec;
      const size_t n = right_.out.write_some(Skip(frame_, frame_done_), ec);
      frame_done_ += n;
      if (n > 0) *moved = true;
      if (ec == asio::error::would_block || ec == asio::error::try_again) return Status::Ok();
      if (ec) return SendFailed(ec);
      if (frame_done_ < frame_total_) continue;
      right_.last_write_ns.store(NowNs());
      write_.unlock();
      ++sent_;
    }
  }

  Status StartFrame(int64_t u) {
    const std::string rank = "rank " + std::to_string(right_.rank);
    if (Status s = mailbox_.PeerStatus(right_.rank); !s.ok()) return s;
    if (!write_.try_lock_until(std::min(deadline_, Clock::now() + std::chrono::milliseconds(1))))
      return Status::Ok();
    if (!right_.out_ready) return UnavailableError(comm_.Where() + ": not connected to " + rank);
    if (!right_.out_broken.empty())
      return UnavailableError(comm_.Where() + ": the connection to " + rank +
                              " is broken: " + right_.out_broken);
    // The first message carries the count after the chunk, written from here: no copy.
    const std::span<const std::byte> payload = std::as_bytes(Chunk(u, /*sent=*/true));
    count_ = data_.size();
    const size_t extra = u == 0 ? sizeof count_ : 0;
    header_ = EncodeFrameHeader(
        {FrameType::kCollective, static_cast<uint32_t>(comm_.rank_), seq_, payload.size() + extra});
    frame_ = {asio::buffer(header_), asio::buffer(payload.data(), payload.size()),
              asio::buffer(&count_, extra)};
    frame_done_ = 0;
    frame_total_ = header_.size() + payload.size() + extra;
    return Status::Ok();
  }

  // As a point-to-point send that fails: the peer's own connection to us tells a departure from
  // a failure; wait a moment for its verdict before deciding here.
  Status SendFailed(const error_code& ec) {
    right_.out_broken = ec.message();
    write_.unlock();
    if (Status s = mailbox_.AwaitPeerEnd(right_.rank, DeadlineIn(std::chrono::seconds(1))); !s.ok())
      return s;
    comm_.PeerFailed(right_.rank, "sending to it failed: " + ec.message(), true);
    return mailbox_.PeerStatus(right_.rank);
  }

  // Nothing moved: fails on what the other threads recorded (a failed or departed neighbour, a
  // broken group) or at the deadline, else sleeps until a socket is ready or the next check.
  // Without `sleep`, only fails or returns (busy waiting), after yielding the core if it yields.
  Status Wait(bool reading = true, bool sleep = true) {
    const bool receiving = reading && reduced_ < posted_up_to_;
    if (receiving) REEL_RETURN_IF_ERROR(mailbox_.CanReceive(left_.rank, tag_));
    if (sent_ < units_) REEL_RETURN_IF_ERROR(mailbox_.PeerStatus(right_.rank));
    const Deadline now = Clock::now();
    if (now >= deadline_)
      return DeadlineExceededError(
          "passed its deadline (" + std::to_string(reduced_) + " of " + std::to_string(units_) +
          " chunks received from rank " + std::to_string(left_.rank) + ", " +
          std::to_string(sent_) + " sent to rank " + std::to_string(right_.rank) + ")" +
          (left_held_back_ ? ": rank " + std::to_string(left_.rank) +
                                 "'s messages that no receive has taken fill the receive budget"
                           : ""));
    if (!sleep) {
      if (yield_) sched_yield();  // a peer on this core gets it (allreduce_waiting.h)
      return Status::Ok();
    }
    pollfd fds[2];
    nfds_t count = 0;
    if (receiving && StillReading(left_) && !left_held_back_) {
      TcpCommunicator::Unmute(left_);  // for the rest of the call: it sleeps from now on
      fds[count++] = {left_.in->native_handle(), POLLIN, 0};
    }
    if (write_.owns_lock()) fds[count++] = {right_.out.native_handle(), POLLOUT, 0};
    // Nothing to wait on: a sender holds the connection to the right; try again soon. Held back
    // by the receive budget, the left connection is readable but must not be read: another
    // thread's receive makes room, seen at the next look.
    const auto slice =
        count == 0 || left_held_back_ ? std::chrono::milliseconds(1) : kCheckFailuresEvery;
    const auto wait = std::min<Clock::duration>(deadline_ - now, slice);
    ::poll(fds, count,
           static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
    return Status::Ok();
  }

  // Takes back what is still posted and lets go of the connection to the right.
  void Finish(const Status& s) {
    const Status why = s.ok() ? InternalError("allreduce ended") : s;
    for (int64_t u = reduced_; u < posted_up_to_; ++u) {
      left_.frames->ReleaseClaim(Receive(u), why);
      mailbox_.Withdraw(Receive(u), why);
    }
    if (write_.owns_lock()) {
      if (frame_done_ > 0)
        right_.out_broken = "an allreduce stopped mid-message (" + s.message() + ")";
      write_.unlock();
    }
  }

  TcpCommunicator& comm_;
  Mailbox& mailbox_;
  const std::span<float> data_;
  const ReduceOp op_;
  const uint32_t seq_;  // this collective's number, in its frames
  const int tag_;       // what its receives match in the Mailbox
  const Deadline deadline_;
  const Clock::duration spin_;  // busy waiting before a sleep
  const bool yield_;            // ... yielding the core between polls
  const size_t n_, r_;
  Peer& left_;
  Peer& right_;
  const ring::Schedule schedule_;
  const size_t chunks_;
  const int64_t units_;
  const size_t slot_floats_;
  std::span<float> scratch_;
  std::array<Mailbox::Posted, kSlots> posted_;
  int64_t posted_up_to_ = 0, reduced_ = 0, sent_ = 0;  // units
  int64_t send_limit_ = units_;                        // units sent at most
  // The last read of the left connection was held back by the receive budget (ReadOnce's
  // kFull): a message ahead of this call's waits for a receive on another thread.
  bool left_held_back_ = false;
  // The frame being written (while write_ holds the connection to the right).
  std::unique_lock<DeadlineMutex> write_;
  std::array<std::byte, kFrameHeaderBytes> header_{};
  std::array<asio::const_buffer, 3> frame_;
  uint64_t count_ = 0;  // sent after the first chunk
  size_t frame_done_ = 0, frame_total_ = 0;
};

// Every call, an empty one too, takes the next collective number and agrees on its arguments
// (reel/collective_agreement.h) on that number's frames, or in a group on one host through its
// shared memory (host_allreduce.cc), before any data moves: ranks that
// disagree all return InvalidArgument with their data and the group in step. Any other failure
// leaves the collectives failed for good (reel/transport.h).
// A call that another thread's AllReduce keeps waiting past its deadline returns
// DeadlineExceeded then, and counts as failed: it took no collective number, so the other ranks'
// messages for it would be taken for this rank's next call.
Status TcpCommunicator::AllReduce(std::span<float> data, ReduceOp op, Deadline deadline) {
  if (world_ == 1) return Status::Ok();
  const std::string what = Where() + ": AllReduce of " + std::to_string(data.size()) + " floats";
  std::unique_lock<DeadlineMutex> one_at_a_time(collective_mu_, std::defer_lock);
  if (!one_at_a_time.try_lock_until(deadline)) {
    Status s = DeadlineExceededError(
        what +
        ": passed its deadline waiting for another thread's AllReduce on this "
        "communicator to end (collectives are called by one thread per rank)");
    std::lock_guard<std::mutex> failed(failed_mu_);
    if (collectives_failed_.empty()) collectives_failed_ = s.message();
    return s;
  }
  if (std::string failed = CollectivesFailed(); !failed.empty())
    return FailedPreconditionError(
        what + ": this communicator's collectives are unusable since one failed (" + failed +
        "); connect a new communicator");
  const uint32_t seq = collective_seq_++;
  if (const uint64_t stale = mailbox_.StartCollective(seq); stale > 0)
    Log("dropped " + std::to_string(stale) +
        " message(s) of earlier allreduces that failed on this rank");
  // A group on one host agrees and reduces through its memory alone.
  Status s = host_.shared && host_.leaders.size() == 1 ? OneHostAllReduce(data, op, deadline)
                                                       : AgreeAndReduce(data, op, seq, deadline);
  if (s.ok() || s.code() == StatusCode::kInvalidArgument) return s.WithContext(what);
  s = s.WithContext(what);
  std::lock_guard<std::mutex> failed(failed_mu_);
  if (collectives_failed_.empty()) collectives_failed_ = s.message();
  return s;
}

// A small call sends its data with its arguments: once every rank has everyone's (and they
// agree), each reduces them itself, in rank order, and no ring runs.
Status TcpCommunicator::AgreeAndReduce(std::span<float> data, ReduceOp op, uint32_t seq,
                                       Deadline deadline) {
  const size_t bytes = data.size() * sizeof(float);
  const bool send_data = !data.empty() && bytes <= options_.allreduce_small_bytes &&
                         bytes * static_cast<size_t>(world_ - 1) <= options_.allreduce_small_bytes;
  std::vector<std::vector<float>> theirs;
  Status s = AgreeOnArguments(agreement::AllReduceArgs(data.size(), op), seq, deadline,
                              send_data ? std::span<const float>(data) : std::span<const float>(),
                              &theirs);
  if (!s.ok() || data.empty()) return s;  // InvalidArgument: nothing moved
  // Every rank sent its data (the ranks agree, so theirs holds every rank's): reduce here. A rank
  // whose options say otherwise makes every rank run the ring.
  if (std::all_of(theirs.begin(), theirs.end(),
                  [&](const auto& d) { return d.size() == data.size(); })) {
    // Into rank 0's copy (the ring's scratch keeps its size for the ring's calls).
    std::vector<float>& sum = theirs[0];
    for (size_t r = 1; r < theirs.size(); ++r)
      ring::Reduce(sum.data(), theirs[r].data(), data.size(), op);
    std::copy(sum.begin(), sum.end(), data.begin());
    return Status::Ok();
  }
  return host_.shared ? HostAllReduce(data, op, seq, deadline)
                      : RingOrDoubling(ring_, data, op, seq, deadline);
}

Status TcpCommunicator::Ring(const std::vector<int>& ring, std::span<float> data, ReduceOp op,
                             uint32_t seq, Deadline deadline) {
  const size_t at = RingPosition(ring, rank_), n = ring.size();
  Peer& left = *peers_[static_cast<size_t>(ring[(at + n - 1) % n])];
  REEL_ASSIGN_OR_RETURN(std::unique_lock<DeadlineMutex> reading,
                        Borrow(left, /*polling=*/AllReduceSpin().count() > 0, deadline));
  Status s = RingAllReduce(*this, ring, data, op, seq, deadline).Run();
  GiveBack(left, std::move(reading));
  return s;
}

std::string TcpCommunicator::CollectivesFailed() {
  std::lock_guard<std::mutex> failed(failed_mu_);
  return collectives_failed_;
}

namespace {

// In an agreement message of AllReduce, a rank's arguments (agreement::kArgsBytes, as
// agreement::GatherArgs writes them) with this bit set in the collective are followed by its data.
constexpr uint32_t kDataFollows = 0x80000000u;

}  // namespace

// Bruck's allgather, as agreement::GatherArgs, of blocks that each carry a rank's arguments and,
// when it sent them, its data.
Status TcpCommunicator::AgreeOnArguments(const agreement::Args& mine, uint32_t seq,
                                         Deadline deadline, std::span<const float> data,
                                         std::vector<std::vector<float>>* theirs) {
  struct Block {
    agreement::Args args;
    bool with_data = false;
    std::vector<float> data;
  };
  const size_t n = static_cast<size_t>(world_), r = static_cast<size_t>(rank_);
  std::vector<Block> have(1);  // have[i]: rank (rank + i) % size's
  have[0].args = mine;
  have[0].with_data = !data.empty();
  have[0].data.assign(data.begin(), data.end());
  std::vector<std::byte> out;
  while (have.size() < n) {
    const size_t m = have.size(), k = std::min(m, n - m);
    out.clear();
    for (size_t i = 0; i < k; ++i) {
      const Block& b = have[i];
      const size_t at = out.size(), floats = b.with_data ? b.data.size() : 0;
      out.resize(at + agreement::kArgsBytes + floats * sizeof(float));
      agreement::Args sent = b.args;
      sent.collective = static_cast<agreement::Collective>(static_cast<uint32_t>(sent.collective) |
                                                           (b.with_data ? kDataFollows : 0));
      agreement::WriteArgs(sent, &out[at]);
      if (floats > 0)
        std::memcpy(&out[at + agreement::kArgsBytes], b.data.data(), floats * sizeof(float));
    }
    const int dest = static_cast<int>((r + n - m) % n), source = static_cast<int>((r + m) % n);
    REEL_RETURN_IF_ERROR(SendFrame(dest, FrameType::kCollective, seq & kCollectiveSeqMask, out,
                                   deadline,
                                   Where() + ": arguments of collective " + std::to_string(seq) +
                                       " to rank " + std::to_string(dest)));
    REEL_ASSIGN_OR_RETURN(Message in, mailbox_.Recv(source, Mailbox::CollectiveTag(seq), deadline));
    const std::vector<std::byte>& bytes = in.payload;
    size_t at = 0;
    for (size_t i = 0; i < k; ++i) {
      Block b;
      if (bytes.size() - at < agreement::kArgsBytes)
        return InternalError("agreeing on a collective's arguments: rank " +
                             std::to_string(source) + " sent " + std::to_string(bytes.size()) +
                             " bytes, too few for " + std::to_string(k) +
                             " ranks' arguments (is it in another collective?)");
      b.args = agreement::ReadArgs(&bytes[at]);
      const auto collective = static_cast<uint32_t>(b.args.collective);
      b.with_data = (collective & kDataFollows) != 0;
      b.args.collective = static_cast<agreement::Collective>(collective & ~kDataFollows);
      at += agreement::kArgsBytes;
      if (b.with_data) {
        if (b.args.count > (bytes.size() - at) / sizeof(float))
          return InternalError("agreeing on a collective's arguments: rank " +
                               std::to_string(source) + "'s message ends inside a rank's data");
        b.data.resize(b.args.count);
        std::memcpy(b.data.data(), &bytes[at], b.args.count * sizeof(float));
        at += b.args.count * sizeof(float);
      }
      have.push_back(std::move(b));
    }
    if (at != bytes.size())
      return InternalError("agreeing on a collective's arguments: rank " + std::to_string(source) +
                           " sent " + std::to_string(bytes.size() - at) +
                           " bytes more than expected (is it in another collective?)");
  }
  std::vector<agreement::Args> all(n);
  for (size_t i = 0; i < n; ++i) all[(r + i) % n] = have[i].args;
  REEL_RETURN_IF_ERROR(agreement::CheckAgreement(all));
  if (theirs) {
    theirs->assign(n, {});
    for (size_t i = 0; i < n; ++i)
      if (have[i].with_data) (*theirs)[(r + i) % n] = std::move(have[i].data);
  }
  return Status::Ok();
}

}  // namespace reel::tcp
