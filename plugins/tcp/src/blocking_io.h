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
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "asio.h"
#include "reel/transport.h"
#include "wire.h"

namespace reel::tcp {

// "host:port" or "[v6 address]:port". InvalidArgument naming `what` and the text otherwise.
Result<Endpoint> ParseHostPort(const std::string& text, const std::string& what);
// Numeric addresses directly, names through the resolver (IPv4 first).
Result<asio::ip::address> ResolveHost(asio::io_context& io, const std::string& host);
bool IsLoopback(const asio::ip::address& a);
std::string ToString(const tcp::endpoint& e);

// Connects to `to`, retrying every few tens of milliseconds while it refuses (its listener may
// not be up yet) until the deadline. `what` names the peer in errors ("rank 0 (coordinator)").
Status ConnectWithRetry(asio::io_context& io, tcp::socket& socket, const Endpoint& to,
                        const std::string& what, Deadline deadline);

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
// that the server is rank `expect_rank` of a group of hello.world_size, and waits for its verdict.
// PermissionDenied if the server cannot prove the secret; FailedPrecondition with the server's
// reason if it refuses.
Status ClientHandshake(asio::io_context& io, tcp::socket& socket, const std::string& secret,
                       const Hello& hello, int expect_rank, const std::string& what,
                       Deadline deadline);

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_BLOCKING_IO_H_
