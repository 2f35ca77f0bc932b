// Admission on its own: which pending handshake is shed, the drop report's line, a rank that
// retries a cut handshake, waiting reports, and the deadline of a host-name lookup.
#include "admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "blocking_io.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using namespace std::chrono_literals;

void* Id(int i) { return reinterpret_cast<void*>(static_cast<intptr_t>(i)); }

TEST(PendingHandshakes, ShedsTheOldestSilentOneOfTheBusiestAddress) {
  PendingHandshakes p(4);
  std::vector<PendingHandshakes::Handle> handles;
  handles.push_back(p.Add("10.0.0.2", Id(1)));  // a rank from another host, oldest of all
  handles.push_back(p.Add("10.0.0.9", Id(2)));
  handles.push_back(p.Add("10.0.0.9", Id(3)));
  EXPECT_FALSE(p.Full());
  handles.push_back(p.Add("10.0.0.9", Id(4)));
  ASSERT_TRUE(p.Full());
  handles[1]->stage = PendingHandshakes::Stage::kAuthenticating;  // it sent a hello: shed last
  EXPECT_EQ(p.Shed(), Id(3));  // the busiest address, its oldest that said nothing yet
  EXPECT_FALSE(p.Full());
  EXPECT_EQ(p.size(), 3);
  EXPECT_EQ(p.Shed(), Id(4));
  handles.push_back(p.Add("10.0.0.9", Id(5)));
  EXPECT_EQ(p.Shed(), Id(5));  // silent, so before the older one that is authenticating
  // One each left: either may go.
  std::set<void*> last{p.Shed(), p.Shed()};
  EXPECT_EQ(last, (std::set<void*>{Id(1), Id(2)}));
  EXPECT_EQ(p.Shed(), nullptr);
  EXPECT_TRUE(handles[0]->shed);
  EXPECT_EQ(p.entries().size(), 5u);  // until their handshakes end
  for (auto h : handles) p.Remove(h);
  EXPECT_EQ(p.size(), 0);
  EXPECT_TRUE(p.entries().empty());
  p.Add("10.0.0.2", Id(5));  // room again
  EXPECT_EQ(p.size(), 1);
}

// A flood of one connection per address: every address has as many pending, so the tie goes by
// age, never by the address's spelling ("127.0.0.1", the local ranks' address, sorts first), and
// the rank that is authenticating goes only when nothing silent is left.
TEST(PendingHandshakes, AFloodOfOneConnectionPerAddressShedsItselfBeforeARankAuthenticating) {
  PendingHandshakes p(5);
  p.Add("127.0.0.3", Id(3));  // the flood's oldest
  p.Add("127.0.0.10", Id(10));
  auto rank = p.Add("127.0.0.1", Id(1));
  rank->stage = PendingHandshakes::Stage::kAuthenticating;
  p.Add("127.0.0.2", Id(2));
  p.Add("127.0.0.4", Id(4));
  ASSERT_TRUE(p.Full());
  EXPECT_EQ(p.Shed(), Id(3));
  p.Add("127.0.0.5", Id(5));  // a newcomer, as after every shed
  EXPECT_EQ(p.Shed(), Id(10));
  p.Add("127.0.0.6", Id(6));
  EXPECT_EQ(p.Shed(), Id(2));
  EXPECT_EQ(p.Shed(), Id(4));
  EXPECT_EQ(p.Shed(), Id(5));
  EXPECT_EQ(p.Shed(), Id(6));
  EXPECT_EQ(p.Shed(), Id(1));  // only now
  EXPECT_EQ(p.Shed(), nullptr);
}

// Among handshakes that all sent a hello (a flood that stalls after a valid-looking one), the
// oldest of the busiest address goes, and between addresses with as many, the older one: a rank
// that has just started authenticating is the newest.
TEST(PendingHandshakes, AmongHandshakesAuthenticatingTheBusiestAddressThenTheOldestGoes) {
  PendingHandshakes p(5);
  std::vector<PendingHandshakes::Handle> handles;
  handles.push_back(p.Add("10.0.0.7", Id(71)));
  handles.push_back(p.Add("10.0.0.5", Id(5)));
  handles.push_back(p.Add("10.0.0.7", Id(72)));
  handles.push_back(p.Add("10.0.0.6", Id(6)));
  handles.push_back(p.Add("10.0.0.1", Id(1)));  // the rank
  for (auto h : handles) h->stage = PendingHandshakes::Stage::kAuthenticating;
  EXPECT_EQ(p.Shed(), Id(71));  // 10.0.0.7 has two
  EXPECT_EQ(p.Shed(), Id(5));   // one each now: the oldest
  EXPECT_EQ(p.Shed(), Id(72));
  EXPECT_EQ(p.Shed(), Id(6));
  EXPECT_EQ(p.Shed(), Id(1));
}

TEST(PendingHandshakes, TheOptionIsBoundedAndNamedWhenOutOfRange) {
  for (const char* bad : {"0", "-1", "100001"}) {
    Result<Options> parsed = ParseOptions(TcpOptionSchema(), {{"max_pending_handshakes", bad}});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    Result<TcpOptions> o = TcpOptionsFrom(*parsed);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(o.status().message(), HasSubstr("'max_pending_handshakes': " + std::string(bad)));
  }
  Result<Options> unset = ParseOptions(TcpOptionSchema(), {});
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(TcpOptionsFrom(*unset)->max_pending_handshakes, 128);
  Result<Options> five = ParseOptions(TcpOptionSchema(), {{"max_pending_handshakes", "5"}});
  ASSERT_TRUE(five.ok());
  EXPECT_EQ(TcpOptionsFrom(*five)->max_pending_handshakes, 5);
}

TEST(DropReport, OneLineCountsEveryReasonAndSource) {
  DropReport d;
  EXPECT_TRUE(d.Add(DropReason::kShed, "127.0.0.1:4000", ""));  // the first arms the timer
  EXPECT_FALSE(d.Add(DropReason::kShed, "127.0.0.1:4001", ""));
  EXPECT_FALSE(d.Add(DropReason::kNotTheProtocol, "10.0.0.4:5", "handshake hello: bad magic"));
  EXPECT_FALSE(d.Add(DropReason::kTimedOut, "127.0.0.1:4002", ""));
  const std::string line = d.Take(10s, 5000, 128);
  EXPECT_EQ(line,
            "dropped 4 connection(s) that did not authenticate in the last 10 s (from 127.0.0.1: "
            "3, 10.0.0.4: 1): 2 shed to keep at most 128 handshakes pending, 1 silent or slow "
            "past the handshake deadline of 5000 ms, 1 not the protocol (last: handshake hello: "
            "bad magic)");
  EXPECT_EQ(d.Take(10s, 5000, 128), "");  // started over
  EXPECT_TRUE(d.Add(DropReason::kFailedAuth, "::1", ""));
}

// A fake coordinator that cuts the first `cuts` handshakes after their hello, then completes
// one as rank 0 does (with the job nonce `job`).
class CuttingServer {
 public:
  CuttingServer(int cuts, Nonce job)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this, cuts, job] {
      for (int i = 0;; ++i) {
        tcp::socket s(io_);
        boost::system::error_code ec;
        acceptor_.accept(s, ec);
        if (ec || stopping_) return;
        std::array<std::byte, kHelloBytes> hello;
        asio::read(s, asio::buffer(hello), ec);
        if (ec) continue;
        ++handshakes_;
        if (i < cuts) continue;  // closed: cut
        Challenge c{0, 2, *FreshNonce(), job, {}};
        auto bytes = EncodeChallenge(c);
        c.mac = *ServerMac("test secret", hello, bytes);
        bytes = EncodeChallenge(c);
        asio::write(s, asio::buffer(bytes), ec);
        std::array<std::byte, kResponseBytes> response;
        asio::read(s, asio::buffer(response), ec);
        asio::write(s, asio::buffer(EncodeControl(ControlType::kAccept, {})), ec);
        return;
      }
    });
  }
  ~CuttingServer() {
    stopping_ = true;
    boost::system::error_code ignored;
    tcp::socket wake(io_);  // a blocked accept() does not see the acceptor closed
    wake.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int handshakes() const { return handshakes_; }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::atomic<int> handshakes_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

TEST(ConnectAndAuthenticate, RetriesACutHandshakeUntilItGetsThrough) {
  Nonce job{};
  job[0] = std::byte{7};
  CuttingServer server(3, job);
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  tcp::socket s(io);
  std::vector<std::string> log;
  Result<Nonce> got = ConnectAndAuthenticate(
      io, s, {"127.0.0.1", server.port()}, "test secret", {Purpose::kJoin, 1, 2, {}, {}}, 0,
      "rank 0 (the coordinator)", DeadlineIn(30s), 1000ms, nullptr,
      [&](const std::string& m) { log.push_back(m); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, job);
  EXPECT_EQ(server.handshakes(), 4);
  ASSERT_EQ(log.size(), 1u);  // the first cut, not every one
  EXPECT_THAT(log[0], HasSubstr("the handshake was cut"));
  work.reset();
  io_thread.join();
}

TEST(ConnectAndAuthenticate, GivesUpAtItsDeadlineNamingTheCuts) {
  CuttingServer server(1 << 30, {});
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  tcp::socket s(io);
  Result<Nonce> got = ConnectAndAuthenticate(
      io, s, {"127.0.0.1", server.port()}, "test secret", {Purpose::kJoin, 1, 2, {}, {}}, 0,
      "rank 0 (the coordinator)", DeadlineIn(1s), 1000ms, nullptr, [](const std::string&) {});
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_THAT(got.status().message(), MatchesRegex(".*rank 0 \\(the coordinator\\): [0-9]+ "
                                                   "handshake\\(s\\) cut before the deadline.*"));
  s.close();
  work.reset();
  io_thread.join();
}

TEST(ResolveHost, ALookupThatHangsEndsAtTheDeadline) {
  // Shared with the abandoned lookup's thread, which outlives ResolveHost and may outlive the
  // test's stack frame: held by value, and the test waits for that thread before it ends.
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool release = false;  // guarded by mu
    int lookups_done = 0;  // guarded by mu
  };
  auto gate = std::make_shared<Gate>();
  auto hanging = [gate](const std::string&) -> Result<std::vector<asio::ip::address>> {
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->cv.wait(lock, [&] { return gate->release; });
    ++gate->lookups_done;
    gate->cv.notify_all();
    return std::vector<asio::ip::address>{asio::ip::make_address("127.0.0.1")};
  };
  Result<asio::ip::address> a = ResolveHost("coordinator.example", DeadlineIn(200ms), hanging);
  EXPECT_EQ(a.status().code(), StatusCode::kDeadlineExceeded) << a.status();
  EXPECT_THAT(a.status().message(), HasSubstr("looking up host 'coordinator.example'"));
  {
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->release = true;  // the abandoned lookup ends on its own
    gate->cv.notify_all();
    gate->cv.wait(lock, [&] { return gate->lookups_done == 1; });
  }
  // Numeric addresses need no lookup; names that resolve return their address.
  EXPECT_EQ(*ResolveHost("127.0.0.1", DeadlineIn(1s), hanging),
            asio::ip::make_address("127.0.0.1"));
  Result<asio::ip::address> v6_first = ResolveHost(
      "h", DeadlineIn(10s), [](const std::string&) -> Result<std::vector<asio::ip::address>> {
        return std::vector<asio::ip::address>{asio::ip::make_address("::1"),
                                              asio::ip::make_address("10.1.2.3")};
      });
  ASSERT_TRUE(v6_first.ok()) << v6_first.status();
  EXPECT_EQ(*v6_first, asio::ip::make_address("10.1.2.3"));  // IPv4 first
}

// A rank with no coordinator says so while it waits, then names it when it gives up.
TEST(WaitingForTheCoordinator, IsReportedThenNamed) {
  TcpOptions options = TestOptions();
  options.waiting_report_interval = 1s;
  const std::string coordinator = FreeCoordinator();
  CapturedStderr captured;
  auto r = MakeTcpTransport(options)->Connect({1, 2, coordinator}, DeadlineIn(2500ms));
  const std::string log = captured.Restore();
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("rank 0 (the coordinator) at " + coordinator +
                                              " never accepted a connection before the deadline"));
  EXPECT_THAT(log, HasSubstr("reel tcp rank 1: still waiting for the coordinator at " +
                             coordinator + " ("));
  EXPECT_THAT(log, HasSubstr(" s of 2 s)"));
}

}  // namespace
}  // namespace reel::tcp::testing
