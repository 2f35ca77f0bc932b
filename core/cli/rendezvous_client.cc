// A launcher's side of the rendezvous (see rendezvous_client.h).
#include "rendezvous_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "rendezvous_wire.h"

namespace reel::cli {
namespace {

using RdzvClock = std::chrono::steady_clock;

Status SendMessage(int fd, const rdzv::Message& m) {
  const std::string frame = rdzv::EncodeFrame(m);
  size_t at = 0;
  while (at < frame.size()) {
    const ssize_t n = ::send(fd, frame.data() + at, frame.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return UnavailableError("send: " + std::string(std::strerror(errno)));
    at += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// The next message on `fd` (whole frames first from `buffer`), waiting until `deadline` (none:
// as long as it takes). Unavailable at the end of the connection, DeadlineExceeded at the
// deadline, InvalidArgument for bytes that are no frame.
Result<rdzv::Message> ReadMessage(int fd, std::string& buffer,
                                  std::optional<RdzvClock::time_point> deadline) {
  while (true) {
    size_t used = 0;
    REEL_ASSIGN_OR_RETURN(std::optional<rdzv::Message> m, rdzv::DecodeFrame(buffer, &used));
    if (m) {
      buffer.erase(0, used);
      return std::move(*m);
    }
    int timeout = -1;
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - RdzvClock::now());
      if (left.count() <= 0) return DeadlineExceededError("no answer in time");
      timeout = static_cast<int>(left.count());
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // the deadline check above ends it
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return UnavailableError("the connection was closed");
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

// A connected socket to host:port, or -1 with errno (ECONNREFUSED: nobody listens yet).
int ConnectOnce(const std::string& host, const std::string& port, std::string* error) {
  return rdzv::FirstTcpSocket(
      host, port,
      [](int fd, const sockaddr* addr, socklen_t len) { return ::connect(fd, addr, len) == 0; },
      error);
}

}  // namespace

Result<std::unique_ptr<RendezvousClient>> RendezvousClient::Connect(
    const std::string& host, const std::string& port, const std::string& job_id,
    const std::string& secret, const std::string& node, RdzvClock::time_point deadline) {
  const std::string where = "the rendezvous at " + host + ":" + port;
  std::string error;
  int fd = -1;
  while ((fd = ConnectOnce(host, port, &error)) < 0) {
    if (RdzvClock::now() >= deadline)
      return UnavailableError("cannot reach " + where +
                              " (the launcher of the --coordinator "
                              "node serves it): " +
                              error);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::unique_ptr<RendezvousClient> c(new RendezvousClient(fd, where));
  const auto handshake_by = std::min(deadline, RdzvClock::now() + std::chrono::seconds(30));
  auto failed = [&](const Status& s) {
    return UnavailableError(where + " did not admit this node: " + s.message());
  };
  Result<rdzv::Message> challenge = ReadMessage(fd, c->buffer_, handshake_by);
  if (!challenge.ok()) return failed(challenge.status());
  if (challenge->type != rdzv::MsgType::kChallenge || challenge->fields[0] != rdzv::kProtocol)
    return failed(InvalidArgumentError("it does not speak " + std::string(rdzv::kProtocol)));
  const std::string& nonce_s = challenge->fields[1];
  REEL_ASSIGN_OR_RETURN(const std::string nonce_c, rdzv::FreshNonceHex());
  REEL_RETURN_IF_ERROR(SendMessage(
      fd,
      {rdzv::MsgType::kHello,
       {job_id, node, nonce_c, rdzv::NodeMac(secret, "client", nonce_s, nonce_c, job_id, node)}}));
  Result<rdzv::Message> answer = ReadMessage(fd, c->buffer_, handshake_by);
  if (!answer.ok()) return failed(answer.status());
  if (answer->type == rdzv::MsgType::kRefuse)
    return FailedPreconditionError(where + " refused this node: " + answer->fields[0]);
  if (answer->type != rdzv::MsgType::kWelcome ||
      !rdzv::SameMac(answer->fields[0],
                     rdzv::NodeMac(secret, "server", nonce_s, nonce_c, job_id, node)))
    return FailedPreconditionError(where +
                                   " did not prove that it holds REEL_SECRET: another job's?");
  return c;
}

RendezvousClient::~RendezvousClient() {
  if (fd_ >= 0) ::close(fd_);
}

Status RendezvousClient::Join(const std::string& failure) {
  Status s = SendMessage(fd_, {rdzv::MsgType::kJoin, {failure}});
  if (!s.ok()) return UnavailableError(where_ + " is lost (its launcher ended?): " + s.message());
  return Status::Ok();
}

Result<std::optional<RoundAssignment>> RendezvousClient::AwaitAssignment(
    int64_t after, std::chrono::milliseconds silence) {
  while (true) {
    Result<rdzv::Message> m = ReadMessage(fd_, buffer_, RdzvClock::now() + silence);
    if (!m.ok() && m.status().code() == StatusCode::kDeadlineExceeded)
      return UnavailableError(where_ + " has said nothing for " +
                              std::to_string(silence.count() / 1000) +
                              " s while this node waits for a round (it speaks every second): its "
                              "launcher is stopped or its host frozen?");
    if (!m.ok())
      return UnavailableError(
          where_ + " is lost (the --coordinator node's launcher ended?): " + m.status().message());
    switch (m->type) {
      case rdzv::MsgType::kAbort:
        return UnavailableError(m->fields[0]);
      case rdzv::MsgType::kFinished:
        return std::optional<RoundAssignment>();
      case rdzv::MsgType::kNewRound:
        continue;  // this node has joined it already, or the server says it is there
      case rdzv::MsgType::kAssign: {
        RoundAssignment a;
        int64_t* numbers[] = {&a.round, &a.restarts, &a.node_rank, &a.nodes};
        bool ok = true;
        for (size_t i = 0; i < 4; ++i) {
          char* end = nullptr;
          *numbers[i] = std::strtoll(m->fields[i].c_str(), &end, 10);
          ok = ok && !m->fields[i].empty() && *end == '\0' && *numbers[i] >= 0;
        }
        a.port = std::atoi(m->fields[4].c_str());
        a.members = m->fields[5];
        if (!ok || a.nodes < 1 || a.node_rank >= a.nodes || a.port < 1 || a.port > 65535)
          return InvalidArgumentError(where_ + " sent a malformed assignment");
        if (a.round <= after) continue;
        return std::optional<RoundAssignment>(a);
      }
      default:
        return InvalidArgumentError(where_ + " sent an unexpected message");
    }
  }
}

bool RendezvousClient::StopRequested(int64_t round) {
  Result<rdzv::Message> m = ReadMessage(fd_, buffer_, RdzvClock::now() + std::chrono::seconds(10));
  if (!m.ok()) {
    lost_ = true;
    return false;
  }
  if (m->type == rdzv::MsgType::kAbort) {
    abort_reason_ = m->fields[0];
    return true;
  }
  if (m->type != rdzv::MsgType::kNewRound || std::atoll(m->fields[0].c_str()) <= round)
    return false;
  new_round_reason_ = m->fields[1];
  return true;
}

void RendezvousClient::Done() { (void)SendMessage(fd_, {rdzv::MsgType::kDone, {}}); }

}  // namespace reel::cli
