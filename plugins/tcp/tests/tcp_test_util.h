// Helpers for the tcp tests: free loopback ports, transports with test-friendly options, groups
// of ranks as threads, and recognisable payloads.
#ifndef REEL_PLUGINS_TCP_TESTS_TCP_TEST_UTIL_H_
#define REEL_PLUGINS_TCP_TESTS_TCP_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "reel/testing/transport_conformance.h"
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

// Heartbeats every 100 ms, a peer silent for 600 ms failed (far above a loaded machine's
// scheduling delays): for tests that keep a connection busy or idle past 2 such timeouts.
inline TcpOptions QuickHeartbeatOptions() {
  TcpOptions o = TestOptions();
  o.heartbeat = std::chrono::milliseconds(100);
  o.heartbeat_timeout = std::chrono::milliseconds(600);
  return o;
}

// `n` tcp ranks as threads of this process (empty, with a test failure, if they do not form).
inline conformance::Communicators Group(int n, const TcpOptions& options = TestOptions()) {
  auto transport = MakeTcpTransport(options);
  Result<conformance::Communicators> comms = conformance::ConnectOnThreads(
      *transport, n, FreeCoordinator(), DeadlineIn(std::chrono::seconds(60)));
  EXPECT_TRUE(comms.ok()) << comms.status();
  return comms.ok() ? std::move(*comms) : conformance::Communicators{};
}

// What this process writes to stderr (fd 2) while it lives, e.g. the transport's log.
class CapturedStderr {
 public:
  CapturedStderr() : file_(std::tmpfile()), saved_(dup(2)) {
    std::cerr.flush();
    dup2(fileno(file_), 2);
  }
  ~CapturedStderr() { Restore(); }
  // What was written so far, capturing on.
  std::string SoFar() const {
    if (saved_ < 0) return text_;
    std::cerr.flush();
    std::fflush(stderr);
    std::string all;
    char buf[4096];
    ssize_t n;
    while ((n = ::pread(fileno(file_), buf, sizeof buf, static_cast<off_t>(all.size()))) > 0)
      all.append(buf, static_cast<size_t>(n));
    return all;
  }
  // Stops capturing; what was written, which also goes on to the real stderr.
  std::string Restore() {
    if (saved_ < 0) return text_;
    std::cerr.flush();
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
    std::rewind(file_);
    std::ostringstream all;
    for (int c; (c = std::fgetc(file_)) != EOF;) all.put(static_cast<char>(c));
    std::fclose(file_);
    text_ = all.str();
    std::cerr << text_;  // still shown (under reel launch, prefixed with the rank)
    return text_;
  }

 private:
  std::FILE* file_;
  int saved_;
  std::string text_;
};

// `bytes` bytes that differ with `seed` and along the payload.
inline std::vector<std::byte> Pattern(size_t bytes, int seed) {
  std::vector<std::byte> p(bytes);
  for (size_t i = 0; i < bytes; ++i) p[i] = std::byte(static_cast<uint8_t>(i * 31 + seed));
  return p;
}

}  // namespace reel::tcp::testing

#endif  // REEL_PLUGINS_TCP_TESTS_TCP_TEST_UTIL_H_
