// One rank of a tcp group once formed: sending, reading, heartbeats, leaving (see
// tcp_communicator.h; forming the group is in formation.cc).
#include "tcp_communicator.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <mutex>
#include <set>

#include "read_readiness.h"

namespace reel::tcp {
namespace {

using boost::system::error_code;

}  // namespace

TcpCommunicator::TcpCommunicator(const TcpOptions& options, int rank, int world,
                                 bool isolate_failures)
    : options_(options),
      rank_(rank),
      world_(world),
      mailbox_(Where(), rank, world, isolate_failures),
      work_(io_.get_executor()),
      acceptor_(io_),
      joiners_(static_cast<size_t>(world)),
      joined_(static_cast<size_t>(world), false),
      incoming_(static_cast<size_t>(world), false),
      pending_(options.max_pending_handshakes),
      drop_timer_(io_),
      admitted_(static_cast<size_t>(world), false) {
  for (int r = 0; r < world; ++r) {
    peers_.push_back(std::make_unique<Peer>(io_));
    peers_.back()->rank = r;
    ring_.push_back(r);
  }
  mailbox_.SetBudget(options.receive_budget_bytes, [this](int source) {
    asio::post(io_, [p = peers_[static_cast<size_t>(source)].get()] { p->room.cancel(); });
  });
  // A receive whose sender stalled mid-message: its reader, waiting for bytes that do not come,
  // wakes and hands the buffer back (ReadOnce), so the receive ends at its deadline.
  mailbox_.SetOnAbandon([this](int source) {
    asio::post(io_, [p = peers_[static_cast<size_t>(source)].get()] {
      error_code ignored;
      if (p->in) p->in->cancel(ignored);
    });
  });
  io_thread_ = std::thread([this] { io_.run(); });
}

TcpCommunicator::~TcpCommunicator() {
  if (heartbeat_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(heartbeat_mu_);
      stop_heartbeats_ = true;
    }
    heartbeat_cv_.notify_all();
    heartbeat_thread_.join();
  }
  // Goodbye first, so peers see a departure (which fails only receives from this rank) rather
  // than a failure (which breaks the group).
  const auto goodbye = EncodeFrameHeader({FrameType::kGoodbye, static_cast<uint32_t>(rank_), 0, 0});
  for (auto& peer : peers_) {
    if (peer->rank == rank_) continue;
    std::lock_guard<DeadlineMutex> lock(peer->write_mu);
    if (!peer->out_ready) continue;
    Status s = WriteFrame(*peer, goodbye, {}, DeadlineIn(std::chrono::seconds(1)),
                          Where() + ": goodbye to rank " + std::to_string(peer->rank));
    error_code ignored;
    if (s.ok()) peer->out.shutdown(tcp::socket::shutdown_send, ignored);
  }
  // Close everything the io thread works on; its coroutines then end and run() returns.
  closing_.store(true);
  asio::post(io_, [this] {
    error_code ignored;
    acceptor_.close(ignored);
    drop_timer_.cancel();
    for (tcp::socket* s : handshaking_) s->close(ignored);
    for (auto& peer : peers_) {
      if (peer->in) peer->in->close(ignored);
      peer->resume.cancel();  // a reader waiting for a borrower (none: no collective runs)
      peer->room.cancel();    // a reader waiting for room in the budget
    }
  });
  work_.reset();
  io_thread_.join();
  ReportDrops();  // what the last interval counted (the io thread has ended)
}

// ---- Point to point ----

Status TcpCommunicator::Send(int dest, int tag, std::span<const std::byte> data,
                             Deadline deadline) {
  const std::string what =
      Where() + ": Send to rank " + std::to_string(dest) + " tag " + std::to_string(tag);
  if (dest < 0 || dest >= world_)
    return InvalidArgumentError(what + ": rank outside [0, " + std::to_string(world_) + ")");
  if (tag < 0 || tag > kMaxTag)
    return InvalidArgumentError(what + ": tag outside [0, " + std::to_string(kMaxTag) + "]");
  if (data.size() > kMaxMessageBytes)
    return InvalidArgumentError(what + ": " + std::to_string(data.size()) +
                                " bytes is more than a message holds (kMaxMessageBytes, " +
                                std::to_string(kMaxMessageBytes) + ")");
  if (dest == rank_) {
    mailbox_.DeliverCopy(rank_, tag, data);
    return Status::Ok();
  }
  return SendFrame(dest, FrameType::kData, static_cast<uint32_t>(tag), data, deadline, what);
}

Status TcpCommunicator::SendFrame(int dest, FrameType type, uint32_t tag,
                                  std::span<const std::byte> data, Deadline deadline,
                                  const std::string& what) {
  Peer& peer = *peers_[static_cast<size_t>(dest)];
  if (Status s = mailbox_.PeerStatus(dest); !s.ok()) return s.WithContext(what);
  std::unique_lock<DeadlineMutex> lock(peer.write_mu, std::defer_lock);
  if (deadline == Deadline::max())
    lock.lock();
  else if (!lock.try_lock_until(deadline))
    return DeadlineExceededError(what + ": passed its deadline waiting for an earlier send to it");
  const auto header = EncodeFrameHeader({type, static_cast<uint32_t>(rank_), tag, data.size()});
  return WriteFrame(peer, header, data, deadline, what);
}

Status TcpCommunicator::WriteRawForTesting(int dest, std::span<const std::byte> bytes,
                                           Deadline deadline) {
  Peer& peer = *peers_[static_cast<size_t>(dest)];
  std::lock_guard<DeadlineMutex> lock(peer.write_mu);
  // Nothing writes to `dest` after bytes that are not the protocol; and a write the receiver
  // cuts short says nothing about it (no failure recorded, none reported to the others): what it
  // makes of the bytes is the test's to see.
  peer.out_broken = "a test wrote raw bytes to it";
  error_code ec;
  size_t done = 0;
  while (done < bytes.size() && !ec) {
    done += peer.out.write_some(asio::buffer(bytes.data() + done, bytes.size() - done), ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) continue;
    ec = {};
    error_code wait_error;
    if (!WaitWritable(peer.out, deadline, &wait_error)) ec = asio::error::timed_out;
    if (wait_error) ec = wait_error;
  }
  if (ec)
    return UnavailableError(Where() + ": raw bytes to rank " + std::to_string(dest) + ": " +
                            ec.message());
  return Status::Ok();
}

Result<Message> TcpCommunicator::Recv(int source, int tag, Deadline deadline) {
  if (source != kAnySource && (source < 0 || source >= world_))
    return InvalidArgumentError(Where() + ": Recv from rank " + std::to_string(source) +
                                " outside [0, " + std::to_string(world_) + ")");
  if (tag < 0 || tag > kMaxTag)
    return InvalidArgumentError(Where() + ": Recv with tag " + std::to_string(tag) +
                                " outside [0, " + std::to_string(kMaxTag) + "]");
  return mailbox_.Recv(source, tag, deadline);
}

Status TcpCommunicator::RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) {
  if (source != kAnySource && (source < 0 || source >= world_))
    return InvalidArgumentError(Where() + ": RecvInto from rank " + std::to_string(source) +
                                " outside [0, " + std::to_string(world_) + ")");
  if (tag < 0 || tag > kMaxTag)
    return InvalidArgumentError(Where() + ": RecvInto with tag " + std::to_string(tag) +
                                " outside [0, " + std::to_string(kMaxTag) + "]");
  if (source == kAnySource || source == rank_ || out.size() < kReadItselfBytes)
    return mailbox_.RecvInto(source, tag, out, deadline);
  Peer& peer = *peers_[static_cast<size_t>(source)];
  // Only when nobody else reads the connection now; if someone does, what it reads reaches the
  // Mailbox, where the receive below finds it.
  std::unique_lock<DeadlineMutex> reading(peer.read_mu, std::try_to_lock);
  if (!reading.owns_lock() || !StillReading(peer)) {
    if (reading.owns_lock()) reading.unlock();
    return mailbox_.RecvInto(source, tag, out, deadline);
  }
  std::optional<Status> s = ReadItself(peer, tag, out, deadline);
  GiveBack(peer, std::move(reading));
  if (s) return *s;
  // A message ahead of this one fills the budget: this receive waits for it as any other does
  // (the io thread reads again once a receive makes room, or claims its message).
  return mailbox_.RecvInto(source, tag, out, deadline);
}

// REQUIRES: peer.read_mu held, its reading going on.
std::optional<Status> TcpCommunicator::ReadItself(Peer& peer, int tag, std::span<std::byte> out,
                                                  Deadline deadline) {
  Mailbox::Posted p;
  p.source = peer.rank;
  p.tag = tag;
  p.out = out;
  mailbox_.Post(p);  // done at once if the message is queued already
  while (!mailbox_.Done(p)) {
    const ReadResult r = ReadOnce(peer);
    const Deadline now = Clock::now();
    if (r == ReadResult::kGot && now < deadline) continue;
    if (mailbox_.Done(p)) break;
    // Held back, the message being read is not this receive's (that one is never held back),
    // so `p` still waits, unfilled: taken back, it waits in the Mailbox instead.
    if (r == ReadResult::kFull && mailbox_.Withdraw(p, Status::Ok())) return std::nullopt;
    // Fails at the deadline (also while bytes keep coming: the receive must end in time), or,
    // when nothing was read, on what this or another thread recorded (the peer left or failed,
    // the group broke); else sleeps until bytes arrive or the next check.
    Status why;
    if (r != ReadResult::kGot) why = mailbox_.CanReceive(peer.rank, tag);
    if (why.ok() && r == ReadResult::kEnded) {
      why = mailbox_.PeerStatus(peer.rank);
      if (why.ok())
        why = UnavailableError(Where() + ": reading from rank " + std::to_string(peer.rank) +
                               " ended");
    }
    if (why.ok() && now >= deadline)
      why = DeadlineExceededError(Where() + ": Recv from rank " + std::to_string(peer.rank) +
                                  " tag " + std::to_string(tag) + " passed its deadline");
    if (!why.ok()) {
      // A message half read into `out` goes back to the Mailbox whole (as when a waiting
      // receive times out), so the failed receive consumes nothing.
      peer.frames->ReleaseClaim(p, why);
      if (!mailbox_.Done(p)) mailbox_.Withdraw(p, why);
      return p.status;
    }
    pollfd fd{peer.in->native_handle(), POLLIN, 0};
    const auto wait = std::min<Clock::duration>(deadline - now, kCheckFailuresEvery);
    ::poll(&fd, 1, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
  }
  return p.status;
}

// REQUIRES: peer.write_mu held. Writes header and payload with one gather write per call, from
// the caller's memory; waits for the socket on the io thread only when the kernel buffer is full.
Status TcpCommunicator::WriteFrame(Peer& peer, std::span<const std::byte> header,
                                   std::span<const std::byte> data, Deadline deadline,
                                   const std::string& what) {
  const std::string rank = "rank " + std::to_string(peer.rank);
  if (!peer.out_ready) return UnavailableError(what + ": not connected to " + rank);
  if (!peer.out_broken.empty())
    return UnavailableError(what + ": the connection to " + rank +
                            " is broken: " + peer.out_broken);
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(header.data(), header.size()),
                                                  asio::buffer(data.data(), data.size())};
  const size_t total = header.size() + data.size();
  size_t done = 0;
  error_code ec;
  while (done < total) {
    done += peer.out.write_some(Skip(buffers, done), ec);
    if (!ec) continue;
    if (ec != asio::error::would_block && ec != asio::error::try_again) break;
    // Wait in slices of a heartbeat, so a send to a peer that stopped reading ends as soon as
    // the peer is declared failed, not at the deadline.
    error_code wait_error;
    const Deadline slice = std::min(deadline, Clock::now() + options_.heartbeat);
    if (WaitWritable(peer.out, slice, &wait_error)) {
      ec = wait_error;
      if (ec) break;
      continue;
    }
    if (slice < deadline) {
      if (Status s = mailbox_.PeerStatus(peer.rank); !s.ok()) {
        if (done > 0) peer.out_broken = s.message();
        return s.WithContext(what);
      }
      continue;
    }
    if (done == 0)
      return DeadlineExceededError(what + ": passed its deadline (" + rank + " is not reading)");
    peer.out_broken = "a send passed its deadline mid-message";
    return DeadlineExceededError(what + ": passed its deadline mid-message; the connection to " +
                                 rank + " cannot be used any more");
  }
  if (ec && done < total) {
    peer.out_broken = ec.message();
    // The peer's own connection to us tells a departure (goodbye) from a failure, and has
    // usually ended already; wait a moment for its verdict before deciding here.
    if (Status s = mailbox_.AwaitPeerEnd(peer.rank, DeadlineIn(std::chrono::seconds(1))); !s.ok())
      return s.WithContext(what);
    PeerFailed(peer.rank, "sending to it failed: " + ec.message(), true);
    return mailbox_.PeerStatus(peer.rank).WithContext(what);
  }
  peer.last_write_ns.store(NowNs());
  return Status::Ok();
}

// ---- Reading ----

// Reads while frames arrive, then waits for the socket to become readable. It reads before
// every wait, so nothing that a borrower left unread stays buffered behind an edge-triggered
// reactor's back; and at most a few reads per turn, so that one busy connection neither holds up
// the others nor keeps a borrower waiting.
asio::awaitable<void> TcpCommunicator::ReadLoop(Peer* peer) {
  constexpr int kReadsPerTurn = 4;
  tcp::socket& socket = *peer->in;
  error_code ec;
  while (!closing_.load() && peer->reading.load()) {
    std::unique_lock<DeadlineMutex> reading = co_await LockReading(peer);
    ReadResult r = ReadResult::kGot;
    for (int i = 0; i < kReadsPerTurn && r == ReadResult::kGot; ++i) r = ReadOnce(*peer);
    reading.unlock();
    if (r == ReadResult::kEnded) break;
    if (r == ReadResult::kFull) {
      // Unread, the peer's frames (heartbeats too) wait in the kernel while it is plainly alive:
      // its silence meanwhile is not a failure. Checks again at every heartbeat interval.
      peer->last_heard_ns.store(NowNs());
      peer->room.expires_after(options_.heartbeat);
      co_await peer->room.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      peer->last_heard_ns.store(NowNs());
      continue;
    }
    if (r == ReadResult::kGot) {  // more may be there: read again after the others' turn
      co_await asio::post(io_, asio::use_awaitable);
      continue;
    }
    // Ends with operation_aborted when the heartbeat thread gives up on the peer (it cancels).
    co_await socket.async_wait(tcp::socket::wait_read,
                               asio::redirect_error(asio::use_awaitable, ec));
  }
  std::unique_lock<DeadlineMutex> reading = co_await LockReading(peer);
  peer->reading.store(false);
  error_code ignored;
  socket.close(ignored);
  if (closing_.load()) co_return;
  if (peer->frames->state() == FrameReader::State::kReading)
    peer->frames->Broke("its connection was closed (heartbeat timeout)");
  ReadingEnded(*peer);
}

TcpCommunicator::ReadResult TcpCommunicator::ReadOnce(Peer& peer) {
  FrameReader& frames = *peer.frames;
  if (frames.state() != FrameReader::State::kReading) return ReadResult::kEnded;
  frames.ReleaseAbandoned();
  if (!frames.Ready()) {
    // Its bytes wait in the kernel while it is plainly alive: its silence meanwhile is not a
    // failure (whoever reads it, the io thread or a borrower that holds it for long).
    peer.last_heard_ns.store(NowNs());
    return ReadResult::kFull;
  }
  try {
    // Whatever has arrived, however much, straight where the frame's bytes go.
    const std::span<std::byte> to = frames.Buffer();
    const ssize_t got = ::recv(peer.in->native_handle(), to.data(), to.size(), MSG_DONTWAIT);
    if (got > 0) {
      peer.last_heard_ns.store(NowNs());
      frames.Consumed(static_cast<size_t>(got));
    } else if (got == 0) {
      frames.Broke(ReadFailure(asio::error::eof));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return ReadResult::kEmpty;
    } else if (errno != EINTR) {
      frames.Broke(ReadFailure(error_code(errno, boost::system::system_category())));
    }
  } catch (const std::exception& e) {  // e.g. no memory for a staging buffer
    frames.Broke(std::string("reading its messages failed: ") + e.what());
  }
  if (frames.state() == FrameReader::State::kReading) return ReadResult::kGot;
  if (!closing_.load()) ReadingEnded(peer);
  return ReadResult::kEnded;
}

void TcpCommunicator::ReadingEnded(Peer& peer) {
  FrameReader& frames = *peer.frames;
  if (frames.state() == FrameReader::State::kLeft)
    mailbox_.PeerLeft(peer.rank);
  else
    PeerFailed(peer.rank, frames.failure(), true);
  frames.AbortMessage();  // after the notice: a woken receiver may end this process
}

asio::awaitable<std::unique_lock<DeadlineMutex>> TcpCommunicator::LockReading(Peer* peer) {
  error_code ec;
  while (true) {
    std::unique_lock<DeadlineMutex> lock(peer->read_mu, std::try_to_lock);
    if (lock.owns_lock()) co_return lock;
    // Say so before trying once more: a borrower that lets go in between then wakes us.
    peer->io_waiting.store(true);
    if (lock.try_lock()) {
      peer->io_waiting.store(false);
      co_return lock;
    }
    peer->resume.expires_at(asio::steady_timer::time_point::max());
    co_await peer->resume.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

Result<std::unique_lock<DeadlineMutex>> TcpCommunicator::Borrow(Peer& peer, bool polling,
                                                                Deadline deadline) {
  std::unique_lock<DeadlineMutex> reading(peer.read_mu, std::defer_lock);
  if (!reading.try_lock_until(deadline))
    return DeadlineExceededError(Where() + ": passed its deadline waiting for rank " +
                                 std::to_string(peer.rank) +
                                 "'s connection, which a receive on another thread is reading");
  if (StillReading(peer)) {
    if (polling) peer.read_muted = MuteReadReadiness(peer.in->native_handle());
    return reading;
  }
  reading.unlock();
  if (Status s = mailbox_.PeerStatus(peer.rank); !s.ok()) return s;
  return UnavailableError(Where() + ": not reading from rank " + std::to_string(peer.rank));
}

void TcpCommunicator::GiveBack(Peer& peer, std::unique_lock<DeadlineMutex> reading) {
  Unmute(peer);  // first: the io thread is told of bytes that arrived meanwhile
  reading.unlock();
  if (peer.io_waiting.exchange(false)) asio::post(io_, [p = &peer] { p->resume.cancel(); });
}

void TcpCommunicator::Unmute(Peer& peer) {
  // Fails only on a closed socket, which reports nothing to anyone any more.
  if (peer.read_muted) (void)UnmuteReadReadiness(peer.in->native_handle());
  peer.read_muted = false;
}

// ---- Heartbeats ----

void TcpCommunicator::StartHeartbeats() {
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
}

void TcpCommunicator::HeartbeatLoop() {
  const auto heartbeat =
      EncodeFrameHeader({FrameType::kHeartbeat, static_cast<uint32_t>(rank_), 0, 0});
  const int64_t interval_ns = std::chrono::nanoseconds(options_.heartbeat).count();
  const int64_t timeout_ns = std::chrono::nanoseconds(options_.heartbeat_timeout).count();
  std::unique_lock<std::mutex> lock(heartbeat_mu_);
  int64_t last_turn_ns = NowNs();
  while (!stop_heartbeats_) {
    heartbeat_cv_.wait_for(lock, options_.heartbeat / 2);
    if (stop_heartbeats_) break;
    lock.unlock();
    // This thread did not run for longer than the timeout: the process was stopped (SIGSTOP) or
    // starved of the CPU. The peers' silence meanwhile says nothing about them (what they sent
    // waits unread in its sockets, for a reader that has not run either): each gets a whole
    // timeout from now, instead of being declared failed before the reader caught up.
    const int64_t turn_ns = NowNs();
    if (turn_ns - last_turn_ns > timeout_ns) {
      for (auto& peer : peers_) peer->last_heard_ns.store(turn_ns);
      Log("did not run for " + std::to_string((turn_ns - last_turn_ns) / 1'000'000) +
          " ms (stopped or starved): its peers get a new heartbeat timeout from now");
    }
    last_turn_ns = turn_ns;
    for (auto& peer : peers_) {
      if (peer->rank == rank_) continue;
      const int64_t now = NowNs();
      // A sender holding the lock is keeping the connection busy already.
      if (now - peer->last_write_ns.load() >= interval_ns) {
        std::unique_lock<DeadlineMutex> write(peer->write_mu, std::try_to_lock);
        if (write.owns_lock() && peer->out_ready && peer->out_broken.empty())
          (void)WriteFrame(*peer, heartbeat, {}, Clock::now() + options_.heartbeat,
                           Where() + ": heartbeat to rank " + std::to_string(peer->rank));
      }
      if (peer->reading.load() && now - peer->last_heard_ns.load() > timeout_ns) {
        const std::string why = "silent for more than " +
                                std::to_string(options_.heartbeat_timeout.count()) +
                                " ms (heartbeat timeout)";
        PeerFailed(peer->rank, why, true);
        peer->reading.store(false);
        Peer* p = peer.get();
        asio::post(io_, [p] {
          // Wakes its reader, which ends (failing a claimed receive) once no collective
          // borrows the connection. Not close(): a borrower may be reading the descriptor.
          error_code ignored;
          if (p->in) p->in->cancel(ignored);
        });
      }
    }
    lock.lock();
  }
}

// Recorded here before anyone is told: a rank that hears the notice may exit at once, and the
// connection it closes must not become this rank's first failure in place of the real one. The
// local receivers wake only after the notice is out, so that this rank cannot exit before it.
void TcpCommunicator::PeerFailed(int rank, const std::string& why, bool tell_others) {
  if (!mailbox_.PeerFailed(rank, why, /*wake=*/false)) return;  // known already, or it left
  Log("rank " + std::to_string(rank) + " is unavailable: " + why);
  if (tell_others) SendNotice(rank, why);
  mailbox_.WakeWaiters();
}

// Small and to live peers, whose readers always drain: the write finishes at once, or within a
// short bound when a sender holds the connection.
void TcpCommunicator::SendNotice(int failed, const std::string& why) {
  const std::string text = why.substr(0, kMaxNoticeBytes);
  const auto header = EncodeFrameHeader({FrameType::kPeerFailed, static_cast<uint32_t>(rank_),
                                         static_cast<uint32_t>(failed), text.size()});
  for (auto& peer : peers_) {
    if (peer->rank == rank_ || peer->rank == failed || !mailbox_.PeerStatus(peer->rank).ok())
      continue;
    const Deadline by = Clock::now() + std::chrono::milliseconds(100);
    std::unique_lock<DeadlineMutex> write(peer->write_mu, std::defer_lock);
    if (!write.try_lock_until(by)) continue;
    (void)WriteFrame(*peer, header, std::as_bytes(std::span(text)), by,
                     Where() + ": failure notice to rank " + std::to_string(peer->rank));
  }
}

void TcpCommunicator::Log(const std::string& message) const {
  std::cerr << ("reel " + Where() + ": " + message + "\n") << std::flush;
}

void TcpCommunicator::LogOncePerProcess(const std::string& message) const {
  static std::mutex mu;
  static auto* said = new std::set<std::string>;  // never destroyed: ranks may log during exit
  std::string key;  // the group, by every rank's address (a later group has other ports)
  for (const auto& peer : peers_)
    key += peer->endpoint.host + ":" + std::to_string(peer->endpoint.port) + " ";
  {
    std::lock_guard lock(mu);
    if (!said->insert(key + "\n" + message).second) return;
  }
  std::cerr << ("reel tcp: " + message + "\n") << std::flush;
}

}  // namespace reel::tcp
