// Helpers for the tcp tests: free loopback ports and transports with test-friendly options.
#ifndef REEL_PLUGINS_TCP_TESTS_TCP_TEST_UTIL_H_
#define REEL_PLUGINS_TCP_TESTS_TCP_TEST_UTIL_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <string>

#include "tcp_transport.h"

namespace reel::tcp::testing {

// A port on 127.0.0.1 that was free a moment ago (the kernel hands out ephemeral ports in a
// random order, so another test grabbing it meanwhile is unlikely).
inline int FreePort() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

inline std::string FreeCoordinator() { return "127.0.0.1:" + std::to_string(FreePort()); }

inline TcpOptions TestOptions() {
  TcpOptions o;
  o.secret = "test secret";
  return o;
}

}  // namespace reel::tcp::testing

#endif  // REEL_PLUGINS_TCP_TESTS_TCP_TEST_UTIL_H_
