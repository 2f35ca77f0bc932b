// Forming a tcp group: rendezvous at rank 0, then the mesh (see tcp_communicator.h).
//
//   1. Rank 0 listens on the coordinator's address. Every other rank connects there, opens its own
//      listener (on the address it reached the coordinator from, or `listen_address`), and sends
//      a Join with that endpoint and its machine id. Rank 0 answers each Join with the set of
//      ranks joined so far (so a rank that gives up can name the missing ones) and, once all
//      have joined, with the table of every rank's endpoint and machine id (from which each rank
//      counts the ranks sharing its machine: ChooseWaiting()).
//   2. Every rank connects to every other rank's listener (its sending connection to that rank)
//      and waits until every other rank has connected to it.
// Every connection, rendezvous ones included, passes the handshake of wire.h first. A connection
// that fails it, speaks anything but the protocol, or stays silent past handshake_timeout is
// closed and counted (one log line per interval); at most max_pending_handshakes may be in
// progress, and one more sheds one of them (admission.h), so a flood cannot keep a rank out: a
// rank whose handshake was cut tries again until its deadline. Every handshake carries the
// launch's job identity (reel/job_id.h) and, once a rank joined, the job nonce rank 0 drew; each
// side refuses the other's if it differs from its own (ClientHandshake, Screen), naming both jobs,
// so an earlier run's coordinator or stray rank with the same secret and port takes no part. A
// join also carries the options that must agree (AgreedOptions); rank 0 ends the rendezvous for
// every rank at the first that differs, naming the option, both values and both ranks.
#include <algorithm>
#include <cstdlib>
#include <optional>

#include "allreduce_waiting.h"
#include "congestion_control.h"
#include "tcp_communicator.h"
#include "waiting.h"

namespace reel::tcp {
namespace {

using boost::system::error_code;

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

}  // namespace

Result<std::unique_ptr<Communicator>> TcpCommunicator::Connect(const TcpOptions& options,
                                                               const TransportContext& ctx,
                                                               Deadline deadline) {
  if (ctx.rank == kDiscover || ctx.world_size == kDiscover) {
    std::string missing = ctx.rank == kDiscover ? "rank" : "";
    if (ctx.world_size == kDiscover) missing += missing.empty() ? "world size" : " and world size";
    return InvalidArgumentError("tcp: the " + missing +
                                " must be given (REEL_RANK, REEL_WORLD_SIZE): tcp cannot discover "
                                "them, unlike a launcher's runtime");
  }
  if (ctx.world_size < 1)
    return InvalidArgumentError("tcp: world size " + std::to_string(ctx.world_size) + " < 1");
  if (ctx.rank < 0 || ctx.rank >= ctx.world_size)
    return InvalidArgumentError("tcp: rank " + std::to_string(ctx.rank) + " outside [0, " +
                                std::to_string(ctx.world_size) + ")");
  if (ctx.world_size > 1 && ctx.coordinator.empty())
    return InvalidArgumentError("tcp: rank " + std::to_string(ctx.rank) + " of " +
                                std::to_string(ctx.world_size) +
                                " needs the coordinator's host:port (REEL_COORDINATOR)");
  std::unique_ptr<TcpCommunicator> c(
      new TcpCommunicator(options, ctx.rank, ctx.world_size, ctx.isolate_failures));
  if (ctx.world_size > 1) REEL_RETURN_IF_ERROR(c->Form(ctx.coordinator, deadline));
  return std::unique_ptr<Communicator>(std::move(c));
}

Status TcpCommunicator::Form(const std::string& coordinator, Deadline deadline) {
  REEL_ASSIGN_OR_RETURN(Endpoint coord, ParseHostPort(coordinator, Where() + ": coordinator"));
  peers_[0]->endpoint = coord;
  peers_[static_cast<size_t>(rank_)]->machine = HostId(options_.host_id);
  REEL_RETURN_IF_ERROR(rank_ == 0 ? HostRendezvous(coord, deadline)
                                  : JoinRendezvous(coord, deadline));
  REEL_RETURN_IF_ERROR(ConnectMesh(deadline));
  REEL_RETURN_IF_ERROR(AwaitIncoming(deadline));
  {
    std::lock_guard<std::mutex> lock(form_mu_);
    joiners_.clear();  // the rendezvous is over; the table went out before the mesh formed
  }
  ChooseWaiting();
  StartHeartbeats();
  return SetUpHostAllReduce(deadline);
}

void TcpCommunicator::ChooseWaiting() {
  const std::string mine = MachineOf(peers_[static_cast<size_t>(rank_)]->machine);
  const auto on_host = std::count_if(peers_.begin(), peers_.end(),
                                     [&](const auto& p) { return MachineOf(p->machine) == mine; });
  const AllReduceWaiting waiting =
      ChooseAllReduceWaiting(options_.allreduce_spin, static_cast<int>(on_host), CoresAvailable());
  allreduce_waiting_ = waiting;
  LogOncePerProcess(waiting.why);
}

Status TcpCommunicator::Listen(const tcp::endpoint& at) {
  if (options_.secret.empty()) {
    if (!IsLoopback(at.address()))
      return InvalidArgumentError(
          Where() + ": listening on " + at.address().to_string() +
          " needs a shared secret: set REEL_SECRET or the option 'secret' on every rank");
    Log("no shared secret (REEL_SECRET): connections are authenticated with an empty key, "
        "acceptable on loopback only");
  }
  error_code ec;
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return UnavailableError(Where() + ": cannot listen on " + ToString(at) + ": " + ec.message());
  asio::co_spawn(io_, AcceptLoop(), asio::detached);
  return Status::Ok();
}

Status TcpCommunicator::HostRendezvous(const Endpoint& coord, Deadline deadline) {
  const std::string bind_host =
      options_.listen_address.empty() ? coord.host : options_.listen_address;
  REEL_ASSIGN_OR_RETURN(asio::ip::address address, ResolveHost(bind_host, deadline));
  REEL_ASSIGN_OR_RETURN(Nonce job, FreshNonce());
  {
    std::lock_guard<std::mutex> lock(form_mu_);
    job_ = job;  // before anyone can connect
  }
  REEL_RETURN_IF_ERROR(Listen(tcp::endpoint(address, coord.port)));
  const std::string where =
      Where() + ": rendezvous at " + coord.host + ":" + std::to_string(coord.port);
  // Tells every rank that joined which ranks have (each time one more arrives), then the table.
  auto tell_all = [&](ControlType type, const std::vector<std::byte>& body,
                      std::vector<std::shared_ptr<tcp::socket>> to, Deadline by) {
    for (int r = 1; r < world_; ++r) {
      if (!to[static_cast<size_t>(r)]) continue;
      Status s = WriteControl(io_, *to[static_cast<size_t>(r)], type, body,
                              Where() + ": rendezvous reply to rank " + std::to_string(r), by);
      if (!s.ok()) Log(s.message());
    }
  };
  std::unique_lock<std::mutex> lock(form_mu_);
  joined_[0] = true;
  int told = 1;
  while (true) {
    const int count = static_cast<int>(std::count(joined_.begin(), joined_.end(), true));
    if (count != told) {
      told = count;
      auto joiners = joiners_;
      auto body = EncodeRankSet(joined_);
      lock.unlock();
      tell_all(ControlType::kProgress, body, joiners, deadline);
      lock.lock();
      continue;  // more may have joined meanwhile
    }
    if (!disagreement_.empty()) {  // a rank's options differ: no group can form
      rendezvous_open_ = false;
      const std::string why = where + ": " + disagreement_;
      auto joiners = joiners_;
      lock.unlock();
      const auto text = Bytes(why);
      tell_all(ControlType::kRefuse, std::vector<std::byte>(text.begin(), text.end()), joiners,
               Clock::now() + std::chrono::seconds(1));
      return FailedPreconditionError(why);
    }
    if (count == world_) break;
    if (!WaitUntil(form_cv_, lock, deadline)) {
      const std::string missing = MissingRanks(joined_);
      rendezvous_open_ = false;
      auto joiners = joiners_;
      lock.unlock();
      const std::string why = where + ": rank(s) " + missing +
                              " never arrived before the deadline (" + std::to_string(count) +
                              " of " + std::to_string(world_) + " ranks joined)";
      const auto text = Bytes(why);
      tell_all(ControlType::kRefuse, std::vector<std::byte>(text.begin(), text.end()), joiners,
               Clock::now() + std::chrono::seconds(1));
      return DeadlineExceededError(why);
    }
  }
  rendezvous_open_ = false;
  std::vector<Member> table;
  for (const auto& p : peers_) table.push_back({p->endpoint, p->machine, AgreedOptions(options_)});
  auto joiners = joiners_;
  lock.unlock();
  tell_all(ControlType::kTable, EncodeTable(table), joiners, deadline);
  return Status::Ok();
}

Status TcpCommunicator::JoinRendezvous(const Endpoint& coord, Deadline deadline) {
  const std::string what = Where() + ": rank 0 (the coordinator)";
  const std::string at = coord.host + ":" + std::to_string(coord.port);
  auto log = [this](const std::string& m) { Log(m); };
  WaitingReport report("the coordinator at " + at, deadline, options_.waiting_report_interval, log);
  // Listen where this host reaches the coordinator unless told otherwise: never on every
  // interface by default, and loopback when the whole group is local. Once, on the first
  // connection that reached it.
  std::optional<Member> mine;
  auto listen_once = [&](tcp::socket& socket) -> Status {
    if (mine) return Status::Ok();
    error_code ec;
    const asio::ip::address reached_from = socket.local_endpoint(ec).address();
    if (ec) return UnavailableError(what + ": " + ec.message());
    asio::ip::address bind = reached_from, advertise = reached_from;
    if (!options_.listen_address.empty()) {
      REEL_ASSIGN_OR_RETURN(bind, ResolveHost(options_.listen_address, deadline));
      if (!bind.is_unspecified()) advertise = bind;
    }
    REEL_RETURN_IF_ERROR(Listen(tcp::endpoint(bind, static_cast<uint16_t>(options_.listen_port))));
    mine = Member{{advertise.to_string(), acceptor_.local_endpoint().port()},
                  peers_[static_cast<size_t>(rank_)]->machine,
                  AgreedOptions(options_)};
    return Status::Ok();
  };
  Nonce job{};  // none until the coordinator names its job; a retry then carries it
  while (true) {
    tcp::socket socket(io_);
    Result<Nonce> named = ConnectAndAuthenticate(io_, socket, coord, options_.secret,
                                                 Hello{Purpose::kJoin,
                                                       static_cast<uint32_t>(rank_),
                                                       static_cast<uint32_t>(world_),
                                                       {},
                                                       job,
                                                       options_.job_id},
                                                 0, what, deadline, options_.handshake_timeout,
                                                 listen_once, log, &report);
    if (!named.ok()) return named.status();
    if (IsZero(*named)) return UnavailableError(what + " named no job (not a coordinator?)");
    job = *named;
    {
      std::lock_guard<std::mutex> lock(form_mu_);
      job_ = job;
    }
    bool answered = false;
    Status joined =
        WriteControl(io_, socket, ControlType::kJoin, EncodeMember(*mine), what, deadline);
    if (joined.ok()) joined = AwaitTable(socket, coord, deadline, &answered);
    // Cut before the coordinator answered the join (e.g. past its handshake deadline): again.
    if (!answered && HandshakeWasCut(joined, deadline)) {
      Log("the join was cut (" + joined.message() + "); joining again");
      continue;
    }
    return joined;
  }
}

Status TcpCommunicator::AwaitTable(tcp::socket& socket, const Endpoint& coord, Deadline deadline,
                                   bool* answered) {
  const std::string what = Where() + ": rank 0 (the coordinator)";
  std::vector<bool> joined(static_cast<size_t>(world_), false);
  while (true) {
    Result<Control> c = ReadControl(io_, socket, what, deadline);
    if (c.status().code() == StatusCode::kDeadlineExceeded) {
      joined[static_cast<size_t>(rank_)] = true;
      return DeadlineExceededError(Where() + ": rendezvous at " + coord.host + ":" +
                                   std::to_string(coord.port) + ": rank(s) " +
                                   MissingRanks(joined) + " never arrived before the deadline");
    }
    if (!c.ok()) return c.status();
    *answered = true;
    if (c->type == ControlType::kProgress) {
      Result<std::vector<bool>> set = DecodeRankSet(c->body, static_cast<uint32_t>(world_));
      if (!set.ok()) return UnavailableError(what + ": " + set.status().message());
      joined = std::move(*set);
      joined[0] = true;
      continue;
    }
    if (c->type != ControlType::kTable)
      return UnavailableError(what + ": unexpected control message " +
                              std::to_string(static_cast<int>(c->type)));
    Result<std::vector<Member>> table = DecodeTable(c->body, static_cast<uint32_t>(world_));
    if (!table.ok()) return UnavailableError(what + ": " + table.status().message());
    for (int r = 0; r < world_; ++r) {
      Peer& p = *peers_[static_cast<size_t>(r)];
      if (r != 0) p.endpoint = (*table)[static_cast<size_t>(r)].endpoint;
      p.machine = (*table)[static_cast<size_t>(r)].machine;
    }
    return Status::Ok();
  }
}

Status TcpCommunicator::ConnectMesh(Deadline deadline) {
  Nonce job;
  {
    std::lock_guard<std::mutex> lock(form_mu_);
    job = job_;
  }
  auto log = [this](const std::string& m) { Log(m); };
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    Peer& p = *peers_[static_cast<size_t>(r)];
    const std::string what = Where() + ": rank " + std::to_string(r);
    WaitingReport report("rank " + std::to_string(r) + " at " + p.endpoint.host + ":" +
                             std::to_string(p.endpoint.port),
                         deadline, options_.waiting_report_interval, log);
    std::lock_guard<DeadlineMutex> lock(p.write_mu);
    Result<Nonce> theirs = ConnectAndAuthenticate(
        io_, p.out, p.endpoint, options_.secret,
        Hello{Purpose::kData,
              static_cast<uint32_t>(rank_),
              static_cast<uint32_t>(world_),
              {},
              job,
              options_.job_id},
        r, what, deadline, options_.handshake_timeout,
        [&](tcp::socket&) { return UseCongestionControl(p, what); }, log, &report);
    if (!theirs.ok()) return theirs.status();
    error_code ec;
    p.out.non_blocking(true, ec);
    if (ec) return UnavailableError(what + ": " + ec.message());
    p.out_ready = true;
    p.last_write_ns.store(Clock::now().time_since_epoch().count());
  }
  return Status::Ok();
}

Status TcpCommunicator::UseCongestionControl(Peer& peer, const std::string& what) {
  REEL_ASSIGN_OR_RETURN(std::string current, CongestionControlOf(peer.out));
  error_code ec;
  const tcp::endpoint remote = peer.out.remote_endpoint(ec);
  const CongestionChoice choice = ChooseCongestionControl(
      options_.congestion_control, !ec && IsLoopback(remote.address()), current);
  if (!choice.algorithm.empty() && choice.algorithm != current) {
    Status set = SetCongestionControl(peer.out, choice.algorithm);
    if (!set.ok()) return set.WithContext(what + ": option congestion_control");
    REEL_ASSIGN_OR_RETURN(current, CongestionControlOf(peer.out));
  }
  peer.congestion_control = current;
  if (!congestion_logged_ && (!choice.algorithm.empty() || !options_.congestion_control.empty())) {
    congestion_logged_ = true;
    LogOncePerProcess(choice.why);
  }
  return Status::Ok();
}

Status TcpCommunicator::AwaitIncoming(Deadline deadline) {
  std::unique_lock<std::mutex> lock(form_mu_);
  auto all = [&] {
    for (int r = 0; r < world_; ++r)
      if (r != rank_ && !admitted_[static_cast<size_t>(r)]) return false;
    return true;
  };
  while (!all()) {
    if (!WaitUntil(form_cv_, lock, deadline) && !all()) {
      std::vector<bool> present = admitted_;
      present[static_cast<size_t>(rank_)] = true;
      return DeadlineExceededError(Where() + ": rank(s) " + MissingRanks(present) +
                                   " never connected to this rank before the deadline");
    }
  }
  formed_ = true;
  return Status::Ok();
}

std::string TcpCommunicator::MissingRanks(const std::vector<bool>& present) const {
  std::string out;
  for (int r = 0; r < world_; ++r)
    if (!present[static_cast<size_t>(r)]) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

asio::awaitable<void> TcpCommunicator::AcceptLoop() {
  while (true) {
    tcp::socket socket(io_);
    error_code ec;
    co_await acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (closing_.load()) co_return;
    if (ec) {
      CountDrop(DropReason::kLocalFailure, "", "accepting a connection: " + ec.message());
      asio::steady_timer pause(io_, std::chrono::milliseconds(100));  // e.g. out of descriptors
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    // Never refuse the newcomer (it may be a rank): shed a pending handshake instead, whose
    // Admit then ends on its closed socket.
    if (pending_.Full()) {
      if (auto* victim = static_cast<tcp::socket*>(pending_.Shed())) {
        error_code ignored;
        victim->close(ignored);
      }
    }
    const tcp::endpoint from = socket.remote_endpoint(ec);
    auto shared = std::make_shared<tcp::socket>(std::move(socket));
    // Tracked here, not in Admit (which starts later), so that a burst of accepts sees the bound.
    PendingHandshakes::Handle pending =
        pending_.Add(ec ? std::string() : from.address().to_string(), shared.get());
    handshaking_.insert(shared.get());
    asio::co_spawn(io_, Admit(std::move(shared), pending), asio::detached);
  }
}

void TcpCommunicator::CountDrop(DropReason reason, const std::string& from,
                                const std::string& detail) {
  if (closing_.load()) return;
  if (!drops_.Add(reason, from, detail)) return;
  drop_timer_.expires_after(options_.drop_report_interval);
  drop_timer_.async_wait([this](const error_code& e) {
    if (!e) ReportDrops();
  });
}

void TcpCommunicator::ReportDrops() {
  const std::string line = drops_.Take(options_.drop_report_interval,
                                       options_.handshake_timeout.count(), pending_.max_pending());
  if (!line.empty()) Log(line);
}

// Why an authenticated connection is refused (empty: admitted; a sending connection's rank is
// then reserved, as incoming_).
std::string TcpCommunicator::Screen(const Hello& hello) {
  const int r = static_cast<int>(hello.rank);
  std::string refusal;
  std::lock_guard<std::mutex> lock(form_mu_);
  if (hello.job_id != options_.job_id)
    refusal = "rank " + std::to_string(r) + " is of job " + JobName(hello.job_id) +
              ", this rank of job " + JobName(options_.job_id) +
              " (a process of another launch with the same secret and port?)";
  else if (hello.world_size != static_cast<uint32_t>(world_))
    refusal = "rank " + std::to_string(r) + " has world size " + std::to_string(hello.world_size) +
              ", this group " + std::to_string(world_);
  else if (IsZero(job_))
    refusal = "rank " + std::to_string(rank_) + " has not joined a job yet";
  else if (!IsZero(hello.job) && hello.job != job_)
    refusal = "rank " + std::to_string(r) + " belongs to another job (job " + ShortHex(hello.job) +
              ", this group's is " + ShortHex(job_) +
              "): a process of an earlier run with the same secret and port?";
  else if (hello.purpose == Purpose::kData && IsZero(hello.job))
    refusal = "rank " + std::to_string(r) + " has not joined this group's job";
  else if (r == rank_)
    refusal = "rank " + std::to_string(r) + " is this rank (two processes with one rank?)";
  else if (hello.purpose == Purpose::kJoin && rank_ != 0)
    refusal = "rank " + std::to_string(rank_) + " is not the coordinator";
  else if (hello.purpose == Purpose::kJoin && !rendezvous_open_)
    refusal = disagreement_.empty() ? "the rendezvous is closed (the group formed or gave up)"
                                    : disagreement_;
  else if (hello.purpose == Purpose::kJoin && joined_[static_cast<size_t>(r)])
    refusal = "rank " + std::to_string(r) + " has already joined (two processes with one rank?)";
  else if (hello.purpose == Purpose::kData && incoming_[static_cast<size_t>(r)])
    refusal = "rank " + std::to_string(r) + " is already connected";
  else if (hello.purpose == Purpose::kData)
    incoming_[static_cast<size_t>(r)] = true;  // reserved; Admit undoes it if the verdict fails
  return refusal;
}

// Runs the server half of the handshake on the io thread, then admits the connection: as a
// rank's sending connection (starting its reader) or, on rank 0, as a rendezvous join.
asio::awaitable<void> TcpCommunicator::Admit(std::shared_ptr<tcp::socket> socket,
                                             PendingHandshakes::Handle pending) {
  // Ends the tracking when the handshake ends, however it ends.
  struct Tracking {
    TcpCommunicator* self;
    tcp::socket* socket;
    std::optional<PendingHandshakes::Handle> pending;
    bool shed() const { return pending && (*pending)->shed; }
    void Authenticated() {
      if (pending) self->pending_.Remove(*pending);
      pending.reset();
    }
    ~Tracking() {
      Authenticated();
      self->handshaking_.erase(socket);
    }
  } tracking{this, socket.get(), pending};
  error_code ec;
  const std::string from = ToString(socket->remote_endpoint(ec));
  // An unauthenticated peer gets handshake_timeout to finish; then its socket is closed, which
  // ends whatever read this coroutine waits in.
  asio::steady_timer watchdog(io_, options_.handshake_timeout);
  auto timed_out = std::make_shared<bool>(false);
  auto admitted = std::make_shared<bool>(false);
  watchdog.async_wait([socket, timed_out, admitted](const error_code& e) {
    if (e || *admitted) return;  // cancelled: the handshake finished in time
    *timed_out = true;
    error_code ignored;
    socket->close(ignored);
  });
  auto drop = [&](DropReason reason, const std::string& why) {
    if (tracking.shed()) reason = DropReason::kShed;
    CountDrop(reason, from, why);
  };
  auto io_failure = [&] {
    if (*timed_out) return drop(DropReason::kTimedOut, "");
    drop(DropReason::kHungUp, ec.message());
  };

  std::array<std::byte, kHelloBytes> hello_bytes;
  co_await asio::async_read(*socket, asio::buffer(hello_bytes),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return io_failure();
  Result<Hello> hello = DecodeHello(hello_bytes);
  if (!hello.ok()) co_return drop(DropReason::kNotTheProtocol, hello.status().message());
  pending->stage = PendingHandshakes::Stage::kAuthenticating;
  Result<Nonce> nonce = FreshNonce();
  if (!nonce.ok()) co_return drop(DropReason::kLocalFailure, nonce.status().message());
  Challenge challenge{
      static_cast<uint32_t>(rank_), static_cast<uint32_t>(world_), *nonce, {}, options_.job_id, {}};
  {
    std::lock_guard<std::mutex> lock(form_mu_);
    challenge.job = job_;
  }
  auto challenge_bytes = EncodeChallenge(challenge);
  Result<Mac> server_mac = ServerMac(options_.secret, hello_bytes, challenge_bytes);
  if (!server_mac.ok()) co_return drop(DropReason::kLocalFailure, server_mac.status().message());
  challenge.mac = *server_mac;
  challenge_bytes = EncodeChallenge(challenge);
  co_await asio::async_write(*socket, asio::buffer(challenge_bytes),
                             asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return io_failure();
  std::array<std::byte, kResponseBytes> response_bytes;
  co_await asio::async_read(*socket, asio::buffer(response_bytes),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return io_failure();
  Result<Mac> mac = DecodeResponse(response_bytes);
  if (!mac.ok()) co_return drop(DropReason::kNotTheProtocol, mac.status().message());
  Result<Mac> client_mac = ClientMac(options_.secret, hello_bytes, challenge_bytes);
  if (!client_mac.ok()) co_return drop(DropReason::kLocalFailure, client_mac.status().message());
  if (!MacsEqual(*mac, *client_mac)) co_return drop(DropReason::kFailedAuth, "");
  tracking.Authenticated();  // no longer shed for newcomers; still under the watchdog

  // Authenticated (it has the secret): from here on the peer is told why it is refused, and this
  // rank says so in a line of its own: a misconfigured rank, not a flood.
  auto refused = [&](const std::string& why) {
    if (!closing_.load()) Log("refused connection from " + from + ": " + why);
  };
  auto broke = [&](const std::string& why) {
    if (!closing_.load()) Log("dropped connection from " + from + " (authenticated): " + why);
  };
  const int r = static_cast<int>(hello->rank);
  std::string refusal = Screen(*hello);
  // An accepted sending connection is the peer's from now on: the watchdog must not close it
  // after the verdict went out (the peer would take it for a cut handshake and come again).
  if (refusal.empty() && hello->purpose == Purpose::kData) {
    *admitted = true;
    watchdog.cancel();
  }
  const std::string text = refusal.empty() ? "" : Where() + " refuses: " + refusal;
  const auto verdict =
      EncodeControl(refusal.empty() ? ControlType::kAccept : ControlType::kRefuse, Bytes(text));
  co_await asio::async_write(*socket, asio::buffer(verdict),
                             asio::redirect_error(asio::use_awaitable, ec));
  if (!refusal.empty()) co_return refused(refusal);
  if (ec || *timed_out) {
    if (hello->purpose == Purpose::kData) {
      std::lock_guard<std::mutex> lock(form_mu_);
      incoming_[static_cast<size_t>(r)] = false;
    }
    co_return broke(*timed_out ? "did not complete the handshake within " +
                                     std::to_string(options_.handshake_timeout.count()) + " ms"
                               : ec.message());
  }

  if (hello->purpose == Purpose::kData) {
    Peer& peer = *peers_[static_cast<size_t>(r)];
    peer.in = std::make_unique<tcp::socket>(std::move(*socket));
    {
      std::lock_guard<DeadlineMutex> reading(peer.read_mu);
      peer.frames = std::make_unique<FrameReader>(
          mailbox_, r, world_,
          [this](int failed, const std::string& why) { PeerFailed(failed, why, false); });
    }
    peer.last_heard_ns.store(Clock::now().time_since_epoch().count());
    peer.reading.store(true);
    asio::co_spawn(io_, ReadLoop(&peer), asio::detached);
    {
      std::lock_guard<std::mutex> lock(form_mu_);
      admitted_[static_cast<size_t>(r)] = true;
    }
    form_cv_.notify_all();
    co_return;
  }

  // A rendezvous join: the rank's endpoint, still under the watchdog.
  auto join_failure = [&] {
    broke(*timed_out
              ? "sent no join within " + std::to_string(options_.handshake_timeout.count()) + " ms"
              : ec.message());
  };
  std::array<std::byte, kControlHeaderBytes> header;
  co_await asio::async_read(*socket, asio::buffer(header),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec || *timed_out) co_return join_failure();
  Result<ControlHeader> h = DecodeControlHeader(header);
  if (!h.ok() || h->type != ControlType::kJoin)
    co_return broke(h.ok() ? "expected a join message" : h.status().message());
  std::vector<std::byte> body(h->length);
  co_await asio::async_read(*socket, asio::buffer(body),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec || *timed_out) co_return join_failure();
  Result<Member> member = DecodeMember(body);
  if (!member.ok()) co_return broke(member.status().message());
  *admitted = true;
  watchdog.cancel();
  {
    std::lock_guard<std::mutex> lock(form_mu_);
    if (!rendezvous_open_)
      refusal = disagreement_.empty() ? "the rendezvous is closed (the group formed or gave up)"
                                      : disagreement_;
    else if (joined_[static_cast<size_t>(r)])
      refusal = "rank " + std::to_string(r) + " has already joined (two processes with one rank?)";
    else if (std::string d =
                 OptionsDisagreement(AgreedOptions(options_), rank_, member->options, r);
             !d.empty())
      refusal = disagreement_ = d;  // HostRendezvous ends the rendezvous for every rank
    else {
      joined_[static_cast<size_t>(r)] = true;
      peers_[static_cast<size_t>(r)]->endpoint = member->endpoint;
      peers_[static_cast<size_t>(r)]->machine = member->machine;
      joiners_[static_cast<size_t>(r)] = socket;
    }
  }
  form_cv_.notify_all();
  if (refusal.empty()) co_return;
  const auto late = EncodeControl(ControlType::kRefuse, Bytes(Where() + " refuses: " + refusal));
  co_await asio::async_write(*socket, asio::buffer(late),
                             asio::redirect_error(asio::use_awaitable, ec));
  refused(refusal);
}

}  // namespace reel::tcp
