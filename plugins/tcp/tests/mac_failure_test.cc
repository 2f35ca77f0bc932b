// The handshake fails closed when OpenSSL cannot compute its MAC. Before, wire.cc ignored HMAC()'s
// result: both sides then "computed" an all-zero MAC and a zero MAC from anyone passed.
//
// OpenSSL fails for real here: this binary (a process of its own) loads only OpenSSL's built-in
// "null" provider before anything else uses OpenSSL, so no digest can be fetched and HMAC()
// returns NULL, as it would where the default provider is missing or misconfigured.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/provider.h>

#include <thread>

#include "blocking_io.h"
#include "wire.h"

namespace reel::tcp {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class OnlyTheNullProvider : public ::testing::Environment {
 public:
  void SetUp() override {
    provider_ = OSSL_PROVIDER_load(nullptr, "null");
    ASSERT_NE(provider_, nullptr);
  }
  // Unloaded at the end, so that LeakSanitizer sees nothing of it left.
  void TearDown() override {
    if (provider_) OSSL_PROVIDER_unload(provider_);
  }

 private:
  OSSL_PROVIDER* provider_ = nullptr;
};
[[maybe_unused]] auto* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new OnlyTheNullProvider);

Nonce Filled(uint8_t value) {
  Nonce n;
  n.fill(std::byte{value});
  return n;
}

TEST(MacFailure, IsAnErrorNeverAZeroMac) {
  const auto hello = EncodeHello({Purpose::kData, 1, 2, Filled(1), Filled(2)});
  const auto challenge = EncodeChallenge({0, 2, Filled(3), Filled(2), {}});
  for (Result<Mac> mac :
       {ServerMac("s3cret", hello, challenge), ClientMac("s3cret", hello, challenge)}) {
    EXPECT_EQ(mac.status().code(), StatusCode::kInternal) << mac.status();
    EXPECT_THAT(mac.status().message(), HasSubstr("HMAC-SHA256 failed (OpenSSL: "));
  }
}

// A server that knows no secret answers with an all-zero MAC: the client must neither accept it
// nor answer it.
TEST(MacFailure, AClientDoesNotTakeAZeroMacForAProof) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = acceptor.local_endpoint().port();
  boost::system::error_code answered;  // what the fake server's read of a response found
  std::thread server([&] {
    tcp::socket s(io);
    acceptor.accept(s);
    std::array<std::byte, kHelloBytes> hello;
    asio::read(s, asio::buffer(hello));
    asio::write(s, asio::buffer(EncodeChallenge({0, 2, Filled(3), Filled(2), {}, Mac{}})));
    std::array<std::byte, kResponseBytes> response;
    asio::read(s, asio::buffer(response), answered);
  });
  tcp::socket client(io);
  ASSERT_TRUE(
      ConnectWithRetry(io, client, {"127.0.0.1", port}, "fake rank 0", DeadlineIn(10s)).ok());
  Result<Nonce> job =
      ClientHandshake(io, client, "s3cret", {Purpose::kData, 1, 2, Filled(1), Filled(2)}, 0,
                      "fake rank 0", DeadlineIn(10s));
  EXPECT_EQ(job.status().code(), StatusCode::kInternal) << job.status();
  EXPECT_THAT(job.status().message(), HasSubstr("HMAC-SHA256 failed"));
  boost::system::error_code ignored;
  client.close(ignored);  // the server's read ends: with the response if one was sent
  server.join();
  EXPECT_EQ(answered, asio::error::eof) << "the client answered a zero MAC";
  work.reset();
  io_thread.join();
}

}  // namespace
}  // namespace reel::tcp
