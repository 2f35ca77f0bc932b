// Blocking socket calls with a deadline (see blocking_io.h).
#include "blocking_io.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "reel/job_id.h"
#include "waiting.h"

namespace reel::tcp {
namespace {

using boost::system::error_code;

// Cancels the socket's operations on the io thread and returns once that has happened, so a
// late cancel can never hit a later operation.
void CancelOnIoThread(asio::io_context& io, tcp::socket& socket) {
  std::promise<void> done;
  asio::post(io, [&] {
    error_code ignored;
    socket.cancel(ignored);
    done.set_value();
  });
  done.get_future().wait();
}

// An asynchronous operation's outcome as a future error code. Not asio::use_future, which hands
// errors over as exceptions: the exception's reference count lives in the uninstrumented
// libstdc++, so ThreadSanitizer took its release on the io thread for a race with the caller.
struct Outcome {
  std::shared_ptr<std::promise<error_code>> promise = std::make_shared<std::promise<error_code>>();
  std::future<error_code> future = promise->get_future();
  // The completion handler: (error_code) for a connect, (error_code, bytes) for a read or write.
  auto Handler() {
    return [p = promise](const error_code& ec, auto&&...) { p->set_value(ec); };
  }
};

// Waits for an operation's outcome; its error code, or timed_out.
error_code Finish(asio::io_context& io, tcp::socket& socket, Outcome& outcome, Deadline deadline) {
  if (!WaitUntil(outcome.future, deadline)) {
    CancelOnIoThread(io, socket);
    outcome.future.wait();
    return asio::error::timed_out;
  }
  return outcome.future.get();
}

Status IoError(const std::string& what, const char* op, const error_code& ec) {
  if (ec == asio::error::timed_out)
    return DeadlineExceededError(what + ": " + op + " passed its deadline");
  return UnavailableError(what + ": " + op + " failed: " + ec.message());
}

}  // namespace

Result<Endpoint> ParseHostPort(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(what + " '" + text + "': " + why + " (expected host:port)");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return bad("no host:port");
  std::string host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) return bad("unbalanced brackets");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad("IPv6 addresses need brackets, e.g. [::1]:29500");
  }
  const std::string port_text = text.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos)
    return bad("port '" + port_text + "' is not a number");
  const int port = std::stoi(port_text);
  if (port < 1 || port > 65535) return bad("port " + port_text + " outside [1, 65535]");
  if (host.size() > kMaxHostBytes) return bad("host name too long");
  return Endpoint{host, static_cast<uint16_t>(port)};
}

Result<std::vector<asio::ip::address>> SystemLookup(const std::string& host) {
  asio::io_context io;
  tcp::resolver resolver(io);
  error_code ec;
  auto results = resolver.resolve(host, "", ec);
  if (ec || results.empty())
    return UnavailableError("cannot resolve host '" + host +
                            "': " + (ec ? ec.message() : std::string("no address")));
  std::vector<asio::ip::address> out;
  for (const auto& r : results) out.push_back(r.endpoint().address());
  return out;
}

namespace {

// One lookup of `host` through `lookup` in a thread of its own, waited for until `deadline`
// (getaddrinfo cannot be cancelled: a lookup still running then finishes alone). nullopt when
// the deadline passed first.
std::optional<Result<std::vector<asio::ip::address>>> LookUpOnce(const std::string& host,
                                                                 Deadline deadline,
                                                                 const HostLookup& lookup) {
  // Shared with the lookup's thread, which may outlive this call.
  struct Lookup {
    std::mutex mu;
    std::condition_variable done;
    std::optional<Result<std::vector<asio::ip::address>>> result;  // guarded by mu
  };
  auto state = std::make_shared<Lookup>();
  std::thread([state, host, lookup] {
    Result<std::vector<asio::ip::address>> r = lookup(host);
    std::lock_guard<std::mutex> lock(state->mu);
    state->result.emplace(std::move(r));
    state->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->mu);
  while (!state->result)
    if (!WaitUntil(state->done, lock, deadline) && !state->result) return std::nullopt;
  return std::move(state->result);
}

}  // namespace

Result<asio::ip::address> ResolveHost(const std::string& host, Deadline deadline,
                                      const HostLookup& lookup) {
  error_code ec;
  asio::ip::address a = asio::ip::make_address(host, ec);
  if (!ec) return a;
  // A name may appear only after this rank started (a Kubernetes service, a pod's DNS record):
  // a failed lookup is tried again, with backoff, until the deadline.
  auto pause = std::chrono::milliseconds(50);
  std::string last = "none finished";
  for (int tries = 1;; ++tries) {
    auto result = LookUpOnce(host, deadline, lookup);
    if (!result) {
      last = "a lookup still running at the deadline";
    } else if (result->ok() && !(*result)->empty()) {
      const std::vector<asio::ip::address>& addresses = **result;
      for (const auto& address : addresses)
        if (address.is_v4()) return address;
      return addresses.front();
    } else {
      last = result->ok() ? "no address" : result->status().message();
    }
    if (!result || Clock::now() + pause >= deadline)
      return DeadlineExceededError("looking up host '" + host +
                                   "' found no address before the deadline (" +
                                   std::to_string(tries) + " lookup(s); last: " + last + ")");
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, std::chrono::milliseconds(2000));
  }
}

WaitingReport::WaitingReport(std::string whom, Deadline deadline, std::chrono::milliseconds every,
                             std::function<void(const std::string&)> log)
    : whom_(std::move(whom)),
      start_(Clock::now()),
      deadline_(deadline),
      every_(every),
      log_(std::move(log)),
      next_(start_ + every) {}

void WaitingReport::Tick() {
  const auto now = Clock::now();
  if (now < next_) return;
  while (next_ <= now) next_ += every_;
  auto seconds = [](auto d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count());
  };
  log_("still waiting for " + whom_ + " (" + seconds(now - start_) + " s of " +
       (deadline_ == Deadline::max() ? std::string("no deadline")
                                     : seconds(deadline_ - start_) + " s") +
       ")");
}

bool IsLoopback(const asio::ip::address& a) {
  if (a.is_v4()) return a.to_v4().is_loopback();
  return a.to_v6().is_loopback() ||
         (a.to_v6().is_v4_mapped() &&
          asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback());
}

std::string ToString(const tcp::endpoint& e) {
  const std::string host = e.address().to_string();
  return (e.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(e.port());
}

Status ConnectWithRetry(asio::io_context& io, tcp::socket& socket, const Endpoint& to,
                        const std::string& what, Deadline deadline, WaitingReport* report) {
  const std::string where = what + " at " + to.host + ":" + std::to_string(to.port);
  Result<asio::ip::address> address = ResolveHost(to.host, deadline);
  if (!address.ok()) return address.status().WithContext(where);
  const tcp::endpoint endpoint(*address, to.port);
  error_code last;
  while (true) {
    error_code ignored;
    if (socket.is_open()) socket.close(ignored);
    Outcome connected;
    socket.async_connect(endpoint, connected.Handler());
    last = Finish(io, socket, connected, report ? std::min(deadline, report->next()) : deadline);
    if (!last) {
      socket.set_option(tcp::no_delay(true), ignored);
      return Status::Ok();
    }
    if (report) report->Tick();
    if (last == asio::error::timed_out) {
      if (Clock::now() < deadline) continue;  // only this attempt's report was due
      break;
    }
    // Refused or unreachable: the peer may still be starting. Try again shortly.
    const Deadline retry = Clock::now() + std::chrono::milliseconds(50);
    if (retry >= deadline) break;
    std::this_thread::sleep_until(retry);
  }
  error_code ignored;
  socket.close(ignored);
  return DeadlineExceededError(where + " never accepted a connection before the deadline" +
                               (last && last != asio::error::timed_out
                                    ? " (last attempt: " + last.message() + ")"
                                    : std::string()));
}

Status ReadExact(asio::io_context& io, tcp::socket& socket, std::span<std::byte> out,
                 const std::string& what, Deadline deadline) {
  Outcome read;
  asio::async_read(socket, asio::buffer(out.data(), out.size()), read.Handler());
  error_code ec = Finish(io, socket, read, deadline);
  return ec ? IoError(what, "read", ec) : Status::Ok();
}

Status WriteAll(asio::io_context& io, tcp::socket& socket, std::span<const std::byte> bytes,
                const std::string& what, Deadline deadline) {
  Outcome written;
  asio::async_write(socket, asio::buffer(bytes.data(), bytes.size()), written.Handler());
  error_code ec = Finish(io, socket, written, deadline);
  return ec ? IoError(what, "write", ec) : Status::Ok();
}

std::string ReadFailure(const boost::system::error_code& ec) {
  if (ec == asio::error::eof)
    return "it closed its connection without saying goodbye (did its process die?)";
  if (ec == asio::error::connection_reset) return "its connection was reset (did its process die?)";
  return "reading from its connection failed: " + ec.message();
}

bool WaitWritable(tcp::socket& socket, Deadline deadline, error_code* error) {
  // poll() in the sending thread itself: the kernel wakes it the moment the peer has drained
  // the buffer. (Waiting through the io thread would add a thread hand-off per refill of the
  // socket buffer, which dominated large sends on a loaded machine.) Asio's synchronous wait
  // has no timeout, hence the native handle.
  pollfd fd{socket.native_handle(), POLLOUT, 0};
  while (true) {
    int timeout_ms = -1;
    if (deadline != Deadline::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      timeout_ms = static_cast<int>(std::min<int64_t>(left.count(), 60'000));
    }
    const int ready = ::poll(&fd, 1, timeout_ms);
    if (ready > 0) {
      *error = {};
      return true;  // writable, or an error the next write reports
    }
    if (ready < 0 && errno != EINTR) {
      *error = error_code(errno, asio::error::get_system_category());
      return true;
    }
  }
}

Result<Control> ReadControl(asio::io_context& io, tcp::socket& socket, const std::string& what,
                            Deadline deadline) {
  std::array<std::byte, kControlHeaderBytes> header;
  REEL_RETURN_IF_ERROR(ReadExact(io, socket, header, what, deadline));
  Result<ControlHeader> h = DecodeControlHeader(header);
  if (!h.ok()) return UnavailableError(what + ": " + h.status().message());
  Control c{h->type, std::vector<std::byte>(h->length)};
  REEL_RETURN_IF_ERROR(ReadExact(io, socket, c.body, what, deadline));
  if (c.type == ControlType::kRefuse)
    return FailedPreconditionError(
        what +
        " refused: " + std::string(reinterpret_cast<const char*>(c.body.data()), c.body.size()));
  return c;
}

Status WriteControl(asio::io_context& io, tcp::socket& socket, ControlType type,
                    std::span<const std::byte> body, const std::string& what, Deadline deadline) {
  return WriteAll(io, socket, EncodeControl(type, body), what, deadline);
}

Result<Nonce> ClientHandshake(asio::io_context& io, tcp::socket& socket, const std::string& secret,
                              const Hello& hello, int expect_rank, const std::string& what,
                              Deadline deadline) {
  const auto hello_bytes = EncodeHello(hello);
  REEL_RETURN_IF_ERROR(WriteAll(io, socket, hello_bytes, what, deadline));
  std::array<std::byte, kChallengeBytes> challenge_bytes;
  REEL_RETURN_IF_ERROR(ReadExact(io, socket, challenge_bytes, what, deadline));
  Result<Challenge> challenge = DecodeChallenge(challenge_bytes);
  if (!challenge.ok()) return UnavailableError(what + ": " + challenge.status().message());
  Result<Mac> server_mac = ServerMac(secret, hello_bytes, challenge_bytes);
  if (!server_mac.ok()) return server_mac.status().WithContext(what);
  if (!MacsEqual(challenge->mac, *server_mac))
    return PermissionDeniedError(what +
                                 " could not prove the shared secret (do all ranks have "
                                 "the same REEL_SECRET or option 'secret'?)");
  Result<Mac> client_mac = ClientMac(secret, hello_bytes, challenge_bytes);
  if (!client_mac.ok()) return client_mac.status().WithContext(what);
  // A server of another launch (an earlier run's coordinator or rank with the same secret and
  // port) or of another group is refused, whatever its rank and verdict. It is answered all the
  // same, so that it refuses this rank in turn and says so in its own log, which its job's owner
  // reads (else it would count one more anonymous hang-up).
  if (challenge->job_id != hello.job_id || (!IsZero(hello.job) && challenge->job != hello.job)) {
    if (WriteAll(io, socket, EncodeResponse(*client_mac), what, deadline).ok())
      (void)ReadControl(io, socket, what, deadline);
    const std::string peer = hello.purpose == Purpose::kJoin
                                 ? "a coordinator"
                                 : "rank " + std::to_string(challenge->rank);
    error_code ec;
    const tcp::endpoint at = socket.remote_endpoint(ec);
    // A restarted attempt's rank that reaches the coordinator of an earlier attempt (on another
    // node, not yet ended): that one goes away, and this attempt's comes (reel/job_id.h). Retried
    // as a cut handshake is, until the connect deadline.
    if (hello.purpose == Purpose::kJoin && IsEarlierAttempt(challenge->job_id, hello.job_id))
      return UnavailableError("tcp rank " + std::to_string(hello.rank) + " of job " +
                              JobName(hello.job_id) + " found a coordinator of job " +
                              JobName(challenge->job_id) + ", an earlier attempt of its launch" +
                              (ec ? "" : " at " + ToString(at)) + "; waiting for its own");
    const std::string which =
        challenge->job_id != hello.job_id
            ? " of job " + JobName(hello.job_id) + " refused " + peer + " of job " +
                  JobName(challenge->job_id)
            : " refused " + peer + " of another group of its job (job nonce " +
                  ShortHex(challenge->job) + ", this rank's " + ShortHex(hello.job) + ")";
    return FailedPreconditionError(
        "tcp rank " + std::to_string(hello.rank) + which + (ec ? "" : " at " + ToString(at)) +
        ": a process of " +
        (challenge->job_id != hello.job_id ? "another launch" : "an earlier run or another group") +
        " with the same secret and port? (REEL_JOB_ID: plugins/tcp/README.md, \"Jobs\")");
  }
  if (challenge->rank != static_cast<uint32_t>(expect_rank) ||
      challenge->world_size != hello.world_size)
    return FailedPreconditionError(what + " is rank " + std::to_string(challenge->rank) + " of " +
                                   std::to_string(challenge->world_size) + ", expected rank " +
                                   std::to_string(expect_rank) + " of " +
                                   std::to_string(hello.world_size));
  REEL_RETURN_IF_ERROR(WriteAll(io, socket, EncodeResponse(*client_mac), what, deadline));
  REEL_ASSIGN_OR_RETURN(Control verdict, ReadControl(io, socket, what, deadline));
  if (verdict.type != ControlType::kAccept)
    return UnavailableError(what + ": expected the handshake's verdict, got control message " +
                            std::to_string(static_cast<int>(verdict.type)));
  return challenge->job;
}

bool HandshakeWasCut(const Status& s, Deadline deadline) {
  return s.code() == StatusCode::kUnavailable ||
         (s.code() == StatusCode::kDeadlineExceeded && Clock::now() < deadline);
}

Result<Nonce> ConnectAndAuthenticate(asio::io_context& io, tcp::socket& socket, const Endpoint& to,
                                     const std::string& secret, Hello hello, int expect_rank,
                                     const std::string& what, Deadline deadline,
                                     std::chrono::milliseconds handshake_timeout,
                                     const std::function<Status(tcp::socket&)>& after_connect,
                                     const std::function<void(const std::string&)>& log,
                                     WaitingReport* report) {
  auto pause = std::chrono::milliseconds(50);
  int cuts = 0;
  while (true) {
    REEL_RETURN_IF_ERROR(ConnectWithRetry(io, socket, to, what, deadline, report));
    if (after_connect) REEL_RETURN_IF_ERROR(after_connect(socket));
    REEL_ASSIGN_OR_RETURN(hello.nonce, FreshNonce());
    const Deadline attempt = std::min(deadline, Clock::now() + 2 * handshake_timeout);
    Result<Nonce> job = ClientHandshake(io, socket, secret, hello, expect_rank, what, attempt);
    if (job.ok() || !HandshakeWasCut(job.status(), deadline)) return job;
    if (++cuts == 1)
      log("the handshake was cut (" + job.status().message() +
          "); retrying until the connect deadline");
    if (report) report->Tick();
    if (Clock::now() + pause >= deadline)
      return DeadlineExceededError(
          what + ": " + std::to_string(cuts) +
          " handshake(s) cut before the deadline (last: " + job.status().message() + ")");
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, std::chrono::milliseconds(1000));
  }
}

}  // namespace reel::tcp
