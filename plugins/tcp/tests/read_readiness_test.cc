// read_readiness.h on a real loopback connection: a muted socket with bytes queued is readable to
// nobody, yet a non-blocking read takes what is there; unmuting reports the bytes at once.
#include "read_readiness.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <string>

#include "asio.h"

namespace reel::tcp {
namespace {

struct Pair {
  asio::io_context io;
  tcp::socket writer{io}, reader{io};
  Pair() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    writer.connect(acceptor.local_endpoint());
    acceptor.accept(reader);
  }
  // Writes `bytes` and waits until they are all queued at the reader (readable without the mark).
  void Queue(const std::string& bytes) {
    asio::write(writer, asio::buffer(bytes));
    int queued = 0;
    while (queued < static_cast<int>(bytes.size())) {
      std::array<char, 64> peek;
      queued = static_cast<int>(
          ::recv(reader.native_handle(), peek.data(), peek.size(), MSG_PEEK | MSG_DONTWAIT));
    }
  }
  bool Readable() {
    pollfd fd{reader.native_handle(), POLLIN, 0};
    return ::poll(&fd, 1, 0) == 1 && (fd.revents & POLLIN);
  }
};

TEST(ReadReadiness, AMutedSocketIsReadableToNobodyButStillReads) {
  Pair p;
  ASSERT_TRUE(MuteReadReadiness(p.reader.native_handle()));
  p.Queue("hello");
  EXPECT_FALSE(p.Readable());
  std::array<char, 64> got{};
  const ssize_t n = ::recv(p.reader.native_handle(), got.data(), got.size(), MSG_DONTWAIT);
  EXPECT_EQ(std::string(got.data(), n > 0 ? static_cast<size_t>(n) : 0), "hello");
}

TEST(ReadReadiness, UnmutingReportsWhatArrivedMeanwhile) {
  Pair p;
  ASSERT_TRUE(MuteReadReadiness(p.reader.native_handle()));
  p.Queue("x");
  ASSERT_FALSE(p.Readable());
  ASSERT_TRUE(UnmuteReadReadiness(p.reader.native_handle()));
  EXPECT_TRUE(p.Readable());
}

TEST(ReadReadiness, TheEndOfTheConnectionIsReportedWhileMuted) {
  Pair p;
  ASSERT_TRUE(MuteReadReadiness(p.reader.native_handle()));
  p.writer.close();
  pollfd fd{p.reader.native_handle(), POLLIN, 0};
  // Readable (POLLIN, or POLLRDHUP/POLLHUP where the kernel sets them): a read sees the end.
  EXPECT_EQ(::poll(&fd, 1, 60'000), 1);
}

}  // namespace
}  // namespace reel::tcp
