// Blocking socket calls with a deadline, for the threads that form a tcp group (Connect) and
// for senders. Asio's synchronous calls cannot time out, so each call here starts the
// asynchronous operation on the communicator's io_context (run by its own thread) and waits for
// it until the deadline; past it the operation is cancelled on the io thread and waited for, so
// no buffer is touched after a call returns.
//
// Thread-safety: a socket may be used by one calling thread at a time (and by no asynchronous
// operation of the io thread meanwhile).
#ifndef REEL_PLUGINS_TCP_SRC_BLOCKING_IO_H_
#define REEL_PLUGINS_TCP_SRC_BLOCKING_IO_H_

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "asio.h"
#include "reel/transport.h"
#include "wire.h"

namespace reel::tcp {

// "host:port" or "[v6 address]:port". InvalidArgument naming `what` and the text otherwise.
Result<Endpoint> ParseHostPort(const std::string& text, const std::string& what);
// Looks a host name up (the system's resolver by default): its addresses, or Unavailable.
using HostLookup = std::function<Result<std::vector<asio::ip::address>>(const std::string& host)>;
Result<std::vector<asio::ip::address>> SystemLookup(const std::string& host);
// Numeric addresses directly, names through `lookup` (IPv4 first). A failed lookup is tried again,
// pausing 50 ms doubling to 2 s, until `deadline` (a name may appear later, as in Kubernetes);
// then DeadlineExceeded naming the host and the last lookup's error. Each lookup runs in a thread
// of its own, left to finish alone if the deadline passes first (getaddrinfo cannot be cancelled).
Result<asio::ip::address> ResolveHost(const std::string& host, Deadline deadline,
                                      const HostLookup& lookup = SystemLookup);

// Says that a rank is still waiting for `whom` every `every`, e.g. "still waiting for the
// coordinator at 10.0.0.1:29500 (20 s of 300 s)", through `log`.
class WaitingReport {
 public:
  WaitingReport(std::string whom, Deadline deadline, std::chrono::milliseconds every,
                std::function<void(const std::string&)> log);
  // Logs if the next report is due.
  void Tick();
  Deadline next() const { return next_; }

 private:
  const std::string whom_;
  const Clock::time_point start_;
  const Deadline deadline_;
  const std::chrono::milliseconds every_;
  const std::function<void(const std::string&)> log_;
  Deadline next_;
};
bool IsLoopback(const asio::ip::address& a);
std::string ToString(const tcp::endpoint& e);

// Connects to `to`, retrying every few tens of milliseconds while it refuses (its listener may
// not be up yet) until the deadline. `what` names the peer in errors ("rank 0 (coordinator)").
// With a `report`, no attempt outlasts its next report, which is given when due.
Status ConnectWithRetry(asio::io_context& io, tcp::socket& socket, const Endpoint& to,
                        const std::string& what, Deadline deadline,
                        WaitingReport* report = nullptr);

// Reads exactly out.size() bytes.
Status ReadExact(asio::io_context& io, tcp::socket& socket, std::span<std::byte> out,
                 const std::string& what, Deadline deadline);
// Writes every byte of `bytes` (blocking socket mode).
Status WriteAll(asio::io_context& io, tcp::socket& socket, std::span<const std::byte> bytes,
                const std::string& what, Deadline deadline);

// Waits in the calling thread until `socket` (in non-blocking mode) is writable. False if the
// deadline passed first; *error is set if the wait failed.
bool WaitWritable(tcp::socket& socket, Deadline deadline, boost::system::error_code* error);

// Why reading a peer's connection failed, in words ("... (did its process die?)").
std::string ReadFailure(const boost::system::error_code& ec);

// The bytes of `buffers` after the first `skip` (a frame's header and payload, partly written).
template <size_t N>
std::array<asio::const_buffer, N> Skip(std::array<asio::const_buffer, N> buffers, size_t skip) {
  for (asio::const_buffer& b : buffers) {
    const size_t drop = std::min(skip, b.size());
    b += drop;
    skip -= drop;
  }
  return buffers;
}

// Reads one control message (wire.h); Refuse arrives as an error carrying the peer's reason.
struct Control {
  ControlType type;
  std::vector<std::byte> body;
};
Result<Control> ReadControl(asio::io_context& io, tcp::socket& socket, const std::string& what,
                            Deadline deadline);
Status WriteControl(asio::io_context& io, tcp::socket& socket, ControlType type,
                    std::span<const std::byte> body, const std::string& what, Deadline deadline);

// The client half of the handshake (wire.h) on a connected socket: authenticates both ways, checks
// that the server is of hello.job_id's launch (and of hello.job's group once it has one) and is
// rank `expect_rank` of a group of hello.world_size, and waits for its verdict. The server's job
// nonce (wire.h) on success. PermissionDenied if the server cannot prove the secret;
// FailedPrecondition naming both jobs if it is of another, or with the server's reason if it
// refuses; Internal if computing a MAC fails; Unavailable if the connection ends (e.g. shed).
Result<Nonce> ClientHandshake(asio::io_context& io, tcp::socket& socket, const std::string& secret,
                              const Hello& hello, int expect_rank, const std::string& what,
                              Deadline deadline);

// True for a handshake that the server (or the network) cut short, which a retry may get
// through: the connection ended, or this attempt's own deadline passed before `deadline`.
bool HandshakeWasCut(const Status& s, Deadline deadline);

// Connects to `to` and runs ClientHandshake with a fresh nonce, again and again while the
// handshake is cut (HandshakeWasCut: e.g. shed by a server flooded with connections), pausing
// 50 ms to 1 s between tries, until `deadline`. Each try gets 2 x `handshake_timeout` (the
// server's deadline is one, so it normally decides first). `after_connect` runs on every new
// connection before its handshake. The first cut is logged through `log`; the rest are counted
// in the final error.
Result<Nonce> ConnectAndAuthenticate(asio::io_context& io, tcp::socket& socket, const Endpoint& to,
                                     const std::string& secret, Hello hello, int expect_rank,
                                     const std::string& what, Deadline deadline,
                                     std::chrono::milliseconds handshake_timeout,
                                     const std::function<Status(tcp::socket&)>& after_connect,
                                     const std::function<void(const std::string&)>& log,
                                     WaitingReport* report = nullptr);

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_BLOCKING_IO_H_
