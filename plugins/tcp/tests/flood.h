// A hostile local process, for the tcp tests: `connections` connections held open to one port,
// each silent, dribbling one byte a second (slowloris), sending random bytes, or sending a frame
// header that claims an enormous payload, and opened again as soon as the rank closes it (as a
// flood that wants to keep the port busy would). On a thread of its own; to loopback unless told
// another address (the tests' own network namespaces: flood_main.cc). Given `sources`, connection
// i comes from sources[i % size] (bound before it connects; on Linux all of 127.0.0.0/8 is
// loopback, so one process floods as many hosts would).
#ifndef REEL_PLUGINS_TCP_TESTS_FLOOD_H_
#define REEL_PLUGINS_TCP_TESTS_FLOOD_H_

#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "asio.h"
#include "wire.h"

namespace reel::tcp::testing {

class Flood {
 public:
  enum class Kind { kSilent, kSlowloris, kRandomBytes, kOversizedLength };
  static const char* Name(Kind k) {
    switch (k) {
      case Kind::kSilent:
        return "silent";
      case Kind::kSlowloris:
        return "slowloris";
      case Kind::kRandomBytes:
        return "random_bytes";
      case Kind::kOversizedLength:
        return "oversized_length";
    }
    return "?";
  }

  Flood(uint16_t port, int connections, Kind kind, const std::string& host = "127.0.0.1",
        const std::vector<std::string>& sources = {})
      : kind_(kind) {
    const tcp::endpoint at(asio::ip::make_address(host), port);
    for (int i = 0; i < connections; ++i) {
      std::optional<asio::ip::address> from;
      if (!sources.empty()) from = asio::ip::make_address(sources[i % sources.size()]);
      asio::co_spawn(io_, Hold(at, from, static_cast<unsigned>(i)), asio::detached);
    }
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Flood() {
    stopping_ = true;
    io_.stop();
    thread_.join();
  }
  // Connections that the rank accepted, and those it then closed.
  int64_t opened() const { return opened_.load(); }
  int64_t cut() const { return cut_.load(); }

 private:
  asio::awaitable<void> Hold(tcp::endpoint at, std::optional<asio::ip::address> from,
                             unsigned seed) {
    std::mt19937 random(seed);
    boost::system::error_code ec;
    while (!stopping_) {
      tcp::socket s(io_);
      if (from) {
        s.open(at.protocol(), ec);
        if (!ec) s.bind(tcp::endpoint(*from, 0), ec);
        if (ec) co_return;  // no such source here: the test sees too few connections opened
      }
      co_await s.async_connect(at, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {  // not listening yet (or no longer)
        asio::steady_timer later(io_, std::chrono::milliseconds(20));
        co_await later.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      ++opened_;
      co_await Misbehave(s, random);
      ++cut_;
    }
  }

  // Returns once the rank closed the connection.
  asio::awaitable<void> Misbehave(tcp::socket& s, std::mt19937& random) {
    boost::system::error_code ec;
    std::vector<std::byte> bytes;
    if (kind_ == Kind::kRandomBytes) {
      bytes.resize(4096);
      for (auto& b : bytes) b = static_cast<std::byte>(random());
    } else if (kind_ == Kind::kOversizedLength) {
      // A data frame header claiming 2^62 bytes, then the start of its payload.
      auto header = EncodeFrameHeader({FrameType::kData, 1, 0, uint64_t{1} << 62});
      bytes.assign(header.begin(), header.end());
      bytes.resize(4096, std::byte{0x5a});
    }
    if (kind_ == Kind::kSlowloris) {
      // A real hello's bytes, one a second: never complete within a handshake deadline.
      const auto hello = EncodeHello({Purpose::kData, 1, 3, {}, {}});
      for (size_t i = 0; i < hello.size() && !stopping_; ++i) {
        co_await asio::async_write(s, asio::buffer(&hello[i], 1),
                                   asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
        asio::steady_timer second(io_, std::chrono::seconds(1));
        co_await second.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        // A closed connection shows at the next write.
      }
    } else if (!bytes.empty()) {
      co_await asio::async_write(s, asio::buffer(bytes),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
    }
    std::array<std::byte, 256> sink;
    while (!ec)
      co_await s.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
  }

  const Kind kind_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> opened_{0}, cut_{0};
  asio::io_context io_;
  std::thread thread_;
};

}  // namespace reel::tcp::testing

#endif  // REEL_PLUGINS_TCP_TESTS_FLOOD_H_
