// One rank of a tcp group once formed: sending, reading, heartbeats, leaving (see
// tcp_communicator.h; forming the group is in formation.cc).
#include "tcp_communicator.h"

#include <iostream>

namespace reel::tcp {
namespace {

using boost::system::error_code;

int64_t NowNs() { return Clock::now().time_since_epoch().count(); }

std::string ReadFailure(const error_code& ec) {
  if (ec == asio::error::eof)
    return "it closed its connection without saying goodbye (did its process die?)";
  if (ec == asio::error::connection_reset) return "its connection was reset (did its process die?)";
  return "reading from its connection failed: " + ec.message();
}

// The bytes of `buffers` after the first `skip`.
std::array<asio::const_buffer, 2> Skip(const std::array<asio::const_buffer, 2>& buffers,
                                       size_t skip) {
  if (skip < buffers[0].size()) return {buffers[0] + skip, buffers[1]};
  return {buffers[1] + (skip - buffers[0].size()), asio::const_buffer()};
}

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
      incoming_(static_cast<size_t>(world), false) {
  for (int r = 0; r < world; ++r) {
    peers_.push_back(std::make_unique<Peer>(io_));
    peers_.back()->rank = r;
  }
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
    for (tcp::socket* s : handshaking_) s->close(ignored);
    for (auto& peer : peers_)
      if (peer->in) peer->in->close(ignored);
  });
  work_.reset();
  io_thread_.join();
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
  if (dest == rank_) {
    mailbox_.DeliverCopy(rank_, tag, data);
    return Status::Ok();
  }
  Peer& peer = *peers_[static_cast<size_t>(dest)];
  if (Status s = mailbox_.PeerStatus(dest); !s.ok()) return s.WithContext(what);
  std::unique_lock<DeadlineMutex> lock(peer.write_mu, std::defer_lock);
  if (deadline == Deadline::max())
    lock.lock();
  else if (!lock.try_lock_until(deadline))
    return DeadlineExceededError(what + ": passed its deadline waiting for an earlier send to it");
  const auto header = EncodeFrameHeader(
      {FrameType::kData, static_cast<uint32_t>(rank_), static_cast<uint32_t>(tag), data.size()});
  return WriteFrame(peer, header, data, deadline, what);
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
  return mailbox_.RecvInto(source, tag, out, deadline);
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

asio::awaitable<void> TcpCommunicator::ReadLoop(Peer* peer) {
  tcp::socket& socket = *peer->in;
  const int r = peer->rank;
  std::string failure;
  bool left = false;
  error_code ec;
  try {
    while (true) {
      std::array<std::byte, kFrameHeaderBytes> header_bytes;
      co_await asio::async_read(socket, asio::buffer(header_bytes),
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        failure = ReadFailure(ec);
        break;
      }
      peer->last_heard_ns.store(NowNs());
      Result<FrameHeader> header = DecodeFrameHeader(header_bytes);
      if (!header.ok()) {
        failure = "it sent bytes that are not the protocol: " + header.status().message();
        break;
      }
      if (header->source != static_cast<uint32_t>(r)) {
        failure = "it sent a frame claiming to come from rank " + std::to_string(header->source);
        break;
      }
      if (header->type == FrameType::kHeartbeat) continue;
      if (header->type == FrameType::kGoodbye) {
        left = true;
        break;
      }
      if (header->type == FrameType::kPeerFailed) {
        std::string reason(header->length, '\0');
        co_await asio::async_read(socket, asio::buffer(reason),
                                  asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
          failure = ReadFailure(ec);
          break;
        }
        if (header->tag >= static_cast<uint32_t>(world_)) {
          failure = "it sent a failure notice for rank " + std::to_string(header->tag);
          break;
        }
        PeerFailed(static_cast<int>(header->tag),
                   "reported by rank " + std::to_string(r) + ": " + reason, false);
        continue;
      }
      Mailbox::Inbound in = mailbox_.Begin(r, static_cast<int>(header->tag), header->length);
      while (in.remaining() > 0) {
        // read_some takes whatever has arrived, however much (async_read would cap every
        // system call at 64 KiB).
        std::span<std::byte> to = in.Next();
        const size_t n = co_await socket.async_read_some(
            asio::buffer(to.data(), to.size()), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) break;
        peer->last_heard_ns.store(NowNs());
        in.Advance(n);
      }
      if (ec) {
        failure = ReadFailure(ec) + " in the middle of a message";
        if (!closing_.load()) PeerFailed(r, failure, true);
        in.Fail(UnavailableError(Where() + ": rank " + std::to_string(r) +
                                 " is unavailable: " + failure));
        break;
      }
      in.Finish();
    }
  } catch (const std::exception& e) {  // e.g. no memory for a staging buffer
    failure = std::string("reading its messages failed: ") + e.what();
  }
  peer->reading.store(false);
  error_code ignored;
  socket.close(ignored);
  if (closing_.load()) co_return;
  if (left) {
    mailbox_.PeerLeft(r);
    co_return;
  }
  PeerFailed(r, failure, true);
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
  while (!stop_heartbeats_) {
    heartbeat_cv_.wait_for(lock, options_.heartbeat / 2);
    if (stop_heartbeats_) break;
    lock.unlock();
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
        Peer* p = peer.get();
        asio::post(io_, [p] {
          error_code ignored;
          if (p->in) p->in->close(ignored);  // ends its reader, which fails a claimed receive
        });
        peer->reading.store(false);
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

}  // namespace reel::tcp
