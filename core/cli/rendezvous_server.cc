// The rendezvous server (see rendezvous_server.h).
#include "rendezvous_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <list>
#include <thread>
#include <vector>

#include "rendezvous_wire.h"

namespace reel::cli {

using ServerClock = std::chrono::steady_clock;

namespace {

constexpr auto kHelloSeconds = std::chrono::seconds(10);
constexpr auto kWaitingWord = std::chrono::seconds(1);  // to nodes waiting: still here
constexpr size_t kMaxUnauthenticated = 64;
constexpr size_t kMaxNodeName = 255;
constexpr size_t kMaxQueuedBytes = 64 * 1024;  // a node that reads nothing is dropped past this

void SayRdzv(const std::string& line) {
  const std::string text = "reel launch: rendezvous: " + line + "\n";
  ssize_t ignored = ::write(2, text.data(), text.size());
  (void)ignored;
}

struct Peer {
  int fd = -1;
  std::string in, out;
  bool authed = false;
  bool closing = false;  // close once `out` is sent
  bool dead = false;
  std::string nonce_s, node;
  ServerClock::time_point hello_by;
  bool wants = false;  // asked for the next round and not assigned one since
  uint64_t seq = 0;    // when it asked
  int64_t round = -1;  // the round it was assigned last
};

// A port nobody listens on right now, on every address of this machine.
Result<int> FreePortForRanks() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  socklen_t len = sizeof addr;
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok)
    return UnavailableError("no free port for the ranks: " + std::string(std::strerror(err)));
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace

class RendezvousServer::State {
 public:
  State(int listen_fd, RendezvousOptions o) : listen_fd_(listen_fd), o_(std::move(o)) {}
  ~State() {
    for (Peer& p : peers_)
      if (p.fd >= 0) ::close(p.fd);
    for (int fd : {listen_fd_, wake_[0], wake_[1]})
      if (fd >= 0) ::close(fd);
  }

  Status Start() {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
      return InternalError("pipe: " + std::string(std::strerror(errno)));
    ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
    opened_at_ = last_join_ = last_report_ = last_word_ = ServerClock::now();
    // The launcher takes SIGCHLD on its own thread (rank_supervisor.h): never this one.
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    ::pthread_sigmask(SIG_BLOCK, &block, &old);
    thread_ = std::thread([this] { Run(); });
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return Status::Ok();
  }

  void Stop() {
    if (!thread_.joinable()) return;
    const char c = 0;
    ssize_t ignored = ::write(wake_[1], &c, 1);
    (void)ignored;
    thread_.join();
  }

 private:
  void Run();
  void Accept();
  void Read(Peer& p);
  void Flush(Peer& p);
  void Handle(Peer& p, const rdzv::Message& m);
  void Hello(Peer& p, const rdzv::Message& m);
  void Join(Peer& p, const std::string& failure);
  void Tick();
  void Close(std::vector<Peer*> joined, const std::string& left_out);
  void Abort(const std::string& reason);
  void Send(Peer& p, const rdzv::Message& m);
  void Drop(Peer& p, const std::string& why);
  int64_t OpenRound() const { return round_ + 1; }

  int listen_fd_;
  RendezvousOptions o_;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::list<Peer> peers_;
  int64_t round_ = -1;  // the last round that closed
  bool open_ = true;
  ServerClock::time_point opened_at_, last_join_, last_report_, last_word_;
  int64_t restarts_ = 0;
  std::vector<std::string> failures_;
  uint64_t next_seq_ = 1;
  bool finished_ = false, aborted_ = false;
  uint64_t dropped_ = 0;  // strangers turned away since the last report
  std::string last_drop_;
};

void RendezvousServer::State::Run() {
  while (true) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    std::vector<Peer*> polled;
    for (Peer& p : peers_) {
      fds.push_back({p.fd, static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
      polled.push_back(&p);
    }
    const int n = ::poll(fds.data(), fds.size(), 100);
    // Asked to stop: what the nodes sent until now is still read (this node's Done, above all).
    const bool stopping = n > 0 && fds[0].revents != 0;
    if (n > 0 && fds[1].revents != 0 && !stopping) Accept();
    for (size_t i = 0; n > 0 && i < polled.size(); ++i) {
      if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) Read(*polled[i]);
      if (!polled[i]->dead && (fds[i + 2].revents & POLLOUT)) Flush(*polled[i]);
    }
    if (stopping) break;
    const auto now = ServerClock::now();
    for (Peer& p : peers_)
      if (!p.authed && !p.dead && now >= p.hello_by) Drop(p, "no proof within 10 s");
    if (!aborted_) Tick();
    if (!aborted_ && now - last_word_ >= kWaitingWord) {
      // Sent before any Assign that comes later on the same stream, and only to nodes that wait
      // for one: no running node reads it as a round to stop for.
      for (Peer& p : peers_)
        if (p.authed && !p.dead && !p.closing && p.wants)
          Send(p, {rdzv::MsgType::kNewRound, {std::to_string(round_), "waiting"}});
      last_word_ = now;
    }
    for (Peer& p : peers_)
      if (p.closing && p.out.empty()) p.dead = true;
    peers_.remove_if([](const Peer& p) {
      if (p.dead && p.fd >= 0) ::close(p.fd);
      return p.dead;
    });
    if (dropped_ > 0 && now - last_report_ >= std::chrono::seconds(10)) {
      SayRdzv("turned away " + std::to_string(dropped_) +
              " connection(s) that did not prove "
              "REEL_SECRET and the job identity (the last: " +
              last_drop_ + ")");
      dropped_ = 0;
      last_report_ = now;
    }
  }
  // What the nodes must still hear (an abort, the end): at most a second more.
  const auto until = ServerClock::now() + std::chrono::seconds(1);
  for (Peer& p : peers_) {
    ::fcntl(p.fd, F_SETFL, ::fcntl(p.fd, F_GETFL) & ~O_NONBLOCK);
    timeval tv{0, 200000};
    ::setsockopt(p.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    while (!p.out.empty() && ServerClock::now() < until) {
      const ssize_t w = ::send(p.fd, p.out.data(), p.out.size(), MSG_NOSIGNAL);
      if (w <= 0) break;
      p.out.erase(0, static_cast<size_t>(w));
    }
  }
}

void RendezvousServer::State::Accept() {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or out of descriptors: the backlog waits
    if (aborted_) {
      ::close(fd);
      continue;
    }
    size_t waiting = 0;
    Peer* oldest = nullptr;
    for (Peer& p : peers_)
      if (!p.authed && !p.dead) {
        ++waiting;
        if (!oldest) oldest = &p;
      }
    if (waiting >= kMaxUnauthenticated) Drop(*oldest, "too many connections without a proof");
    Result<std::string> nonce = rdzv::FreshNonceHex();
    if (!nonce.ok()) {
      ::close(fd);
      continue;
    }
    Peer& p = peers_.emplace_back();
    p.fd = fd;
    p.nonce_s = *nonce;
    p.hello_by = ServerClock::now() + kHelloSeconds;
    Send(p, {rdzv::MsgType::kChallenge, {rdzv::kProtocol, p.nonce_s}});
  }
}

void RendezvousServer::State::Read(Peer& p) {
  if (p.dead) return;
  char chunk[4096];
  const ssize_t n = ::recv(p.fd, chunk, sizeof chunk, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    if (p.authed) SayRdzv("node " + p.node + " left");
    Drop(p, p.authed ? "" : "closed before a proof");
    return;
  }
  p.in.append(chunk, static_cast<size_t>(n));
  while (!p.dead && !p.closing) {
    size_t used = 0;
    Result<std::optional<rdzv::Message>> m = rdzv::DecodeFrame(p.in, &used);
    if (!m.ok()) {
      if (p.authed) SayRdzv("node " + p.node + " sent " + m.status().message() + "; dropped");
      Drop(p, m.status().message());
      return;
    }
    if (!*m) return;
    p.in.erase(0, used);
    Handle(p, **m);
  }
}

void RendezvousServer::State::Flush(Peer& p) {
  while (!p.out.empty()) {
    const ssize_t w = ::send(p.fd, p.out.data(), p.out.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;
    if (w <= 0) {
      Drop(p, "send failed");
      return;
    }
    p.out.erase(0, static_cast<size_t>(w));
  }
  if (p.closing) p.dead = true;
}

void RendezvousServer::State::Send(Peer& p, const rdzv::Message& m) {
  if (p.dead) return;
  p.out += rdzv::EncodeFrame(m);
  if (p.out.size() > kMaxQueuedBytes) return Drop(p, "reads nothing");
  Flush(p);
}

void RendezvousServer::State::Drop(Peer& p, const std::string& why) {
  if (p.dead) return;
  p.dead = true;
  if (!p.authed) {
    ++dropped_;
    last_drop_ = why;
  }
}

void RendezvousServer::State::Handle(Peer& p, const rdzv::Message& m) {
  if (!p.authed) {
    if (m.type != rdzv::MsgType::kHello) return Drop(p, "a first message other than Hello");
    return Hello(p, m);
  }
  if (m.type == rdzv::MsgType::kJoin) return Join(p, m.fields[0]);
  if (m.type == rdzv::MsgType::kDone) {
    if (!finished_) SayRdzv("node " + p.node + "'s ranks finished: the job is done");
    finished_ = true;
    for (Peer& q : peers_)
      if (q.authed && q.wants) {
        Send(q, {rdzv::MsgType::kFinished, {}});
        q.closing = true;
      }
    return;
  }
  SayRdzv("node " + p.node + " sent an unexpected message; dropped");
  p.dead = true;
}

void RendezvousServer::State::Hello(Peer& p, const rdzv::Message& m) {
  const std::string &job = m.fields[0], &node = m.fields[1], &nonce_c = m.fields[2];
  const bool named =
      !node.empty() && node.size() <= kMaxNodeName &&
      std::all_of(node.begin(), node.end(), [](char c) { return c > ' ' && c <= '~'; });
  if (!named || nonce_c.size() != 64 ||
      !rdzv::SameMac(m.fields[3],
                     rdzv::NodeMac(o_.secret, "client", p.nonce_s, nonce_c, job, node))) {
    Send(p, {rdzv::MsgType::kRefuse, {"not admitted: no proof of this job's REEL_SECRET"}});
    p.closing = true;
    Drop(p, "a wrong proof");
    return;
  }
  p.authed = true;
  std::string refusal;
  if (job != o_.job_id) refusal = "this rendezvous is job " + o_.job_id + "'s, not " + job + "'s";
  for (const Peer& q : peers_)
    if (&q != &p && q.authed && !q.dead && q.node == node)
      refusal = "a node named " + node + " is here already";
  if (!refusal.empty()) {
    SayRdzv("refused node " + node + ": " + refusal);
    Send(p, {rdzv::MsgType::kRefuse, {refusal}});
    p.closing = true;
    return;
  }
  p.node = node;
  Send(p, {rdzv::MsgType::kWelcome,
           {rdzv::NodeMac(o_.secret, "server", p.nonce_s, nonce_c, job, node)}});
}

void RendezvousServer::State::Join(Peer& p, const std::string& failure) {
  if (finished_) {
    Send(p, {rdzv::MsgType::kFinished, {}});
    p.closing = true;
    return;
  }
  const bool member = round_ >= 0 && p.round == round_;
  p.wants = true;
  p.seq = next_seq_++;
  if (open_) {
    last_join_ = ServerClock::now();
    SayRdzv("node " + p.node + " joined round " + std::to_string(OpenRound()));
    return;
  }
  size_t running = 0;
  for (const Peer& q : peers_) running += q.authed && !q.dead && q.round == round_ && !q.wants;
  if (!member && static_cast<int64_t>(running) >= o_.max_nodes) {
    SayRdzv("node " + p.node + " waits: round " + std::to_string(round_) + " runs on " +
            std::to_string(o_.max_nodes) + " node(s), the most --nnodes allows");
    return;
  }
  std::string why =
      "node " + p.node + (member ? " left round " + std::to_string(round_) : " asks to join");
  if (member && !failure.empty()) {
    why = "node " + p.node + ": " + failure;
    failures_.push_back("round " + std::to_string(round_) + ": " + why);
    if (restarts_ >= o_.max_restarts) {
      std::string every;
      if (failures_.size() > 1)
        for (const std::string& f : failures_)
          every += (every.empty() ? "; every failure: " : "; ") + f;
      return Abort(why + " after " + std::to_string(restarts_) +
                   " restart(s), the most --max-restarts allows" + every);
    }
    ++restarts_;
  }
  open_ = true;
  opened_at_ = last_join_ = ServerClock::now();
  SayRdzv("round " + std::to_string(OpenRound()) + " opens: " + why);
  for (Peer& q : peers_)
    if (q.authed && !q.dead && q.round == round_ && !q.wants)
      Send(q, {rdzv::MsgType::kNewRound, {std::to_string(OpenRound()), why}});
}

void RendezvousServer::State::Tick() {
  if (!open_) return;
  std::vector<Peer*> joined;
  bool own = false;
  std::string pending;  // nodes of the last round still connected that have not joined
  for (Peer& q : peers_) {
    if (!q.authed || q.dead) continue;
    if (q.wants) {
      joined.push_back(&q);
      own = own || q.node == o_.own_node;
    } else if (round_ >= 0 && q.round == round_) {
      // Still stopping its ranks, or not answering at all (a launcher stopped by SIGSTOP).
      pending += (pending.empty() ? "" : ", ") + q.node;
    }
  }
  std::sort(joined.begin(), joined.end(), [](Peer* a, Peer* b) { return a->seq < b->seq; });
  const auto now = ServerClock::now();
  const int64_t n = static_cast<int64_t>(joined.size());
  const bool timed_out = now - opened_at_ >= o_.join_timeout;
  // --rdzv-timeout-seconds as given, for the lines below (only when one is said).
  auto secs = [&] {
    char text[32];
    std::snprintf(text, sizeof text, "%g", static_cast<double>(o_.join_timeout.count()) / 1000.0);
    return std::string(text);
  };
  if (own && (n >= o_.max_nodes ||
              (n >= o_.min_nodes &&
               ((pending.empty() && now - last_join_ >= o_.last_call) || timed_out)))) {
    std::string left_out;  // named, so that whoever looks for the stopped launcher finds it
    if (timed_out && !pending.empty())
      left_out = "; without " + pending + " of round " + std::to_string(round_) +
                 ", connected but not joined within " + secs() + " s (--rdzv-timeout-seconds)";
    return Close(std::move(joined), left_out);
  }
  if (!timed_out) return;
  std::string names;
  for (Peer* q : joined) names += (names.empty() ? "" : ", ") + q->node;
  Abort("rendezvous round " + std::to_string(OpenRound()) + ": " + std::to_string(n) +
        " node(s) joined within " + secs() + " s (--rdzv-timeout-seconds), fewer " + "than the " +
        std::to_string(o_.min_nodes) + " --nnodes " + std::to_string(o_.min_nodes) + ":" +
        std::to_string(o_.max_nodes) + " needs" +
        (own ? "" : " or without the --coordinator node") +
        "; joined: " + (names.empty() ? "none" : names));
}

void RendezvousServer::State::Close(std::vector<Peer*> joined, const std::string& left_out) {
  Result<int> port = FreePortForRanks();
  if (!port.ok()) return Abort(std::string(port.status().message()));
  std::stable_partition(joined.begin(), joined.end(),
                        [this](Peer* q) { return q->node == o_.own_node; });
  if (static_cast<int64_t>(joined.size()) > o_.max_nodes) joined.resize(o_.max_nodes);
  round_ = OpenRound();
  open_ = false;
  std::string members;
  for (Peer* q : joined) members += (members.empty() ? "" : ", ") + q->node;
  const std::string n = std::to_string(joined.size());
  SayRdzv("round " + std::to_string(round_) + " formed with " + n + " node(s): " + members +
          left_out);
  for (size_t i = 0; i < joined.size(); ++i) {
    joined[i]->wants = false;
    joined[i]->round = round_;
    Send(*joined[i], {rdzv::MsgType::kAssign,
                      {std::to_string(round_), std::to_string(restarts_), std::to_string(i), n,
                       std::to_string(*port), members}});
  }
}

void RendezvousServer::State::Abort(const std::string& reason) {
  aborted_ = true;
  SayRdzv("the job ends: " + reason);
  for (Peer& q : peers_)
    if (q.authed && !q.dead) {
      Send(q, {rdzv::MsgType::kAbort, {reason}});
      q.closing = true;
    }
}

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(int listen_fd,
                                                                  RendezvousOptions options) {
  std::unique_ptr<RendezvousServer> server(new RendezvousServer());
  server->state_ = std::make_unique<State>(listen_fd, std::move(options));
  REEL_RETURN_IF_ERROR(server->state_->Start());
  return server;
}

RendezvousServer::~RendezvousServer() {
  if (state_) state_->Stop();
}

int ListenForRendezvous(const std::string& host, const std::string& port) {
  std::string error;
  return rdzv::FirstTcpSocket(
      host, port,
      [](int fd, const sockaddr* addr, socklen_t len) {
        const int one = 1;
        return ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
               ::bind(fd, addr, len) == 0 && ::listen(fd, 128) == 0;
      },
      &error);
}

}  // namespace reel::cli
