// Hostile peers against a tcp group, on loopback: floods of connections that never authenticate
// (silent, one byte a second, random bytes, an enormous length) while the group forms and while
// it computes, a replayed handshake, a rank of an earlier job, an authenticated rank that sends
// an oversized length. Each test shows that the group forms, or trains on, and logs how long
// forming took ("[hostile] ...", the figures of docs/reliability.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <regex>
#include <thread>

#include "blocking_io.h"
#include "flood.h"
#include "reel/core/collectives.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using Comms = std::vector<std::unique_ptr<Communicator>>;

// A handshake deadline short enough for tests of a few seconds, long enough for a loaded machine.
TcpOptions HostileOptions() {
  TcpOptions o = TestOptions();
  o.handshake_timeout = 1000ms;
  return o;
}

uint16_t PortOf(const std::string& coordinator) {
  return static_cast<uint16_t>(std::stoi(coordinator.substr(coordinator.rfind(':') + 1)));
}

// Ranks `ranks` of `world`, each through its own transport (options per rank), on threads.
std::vector<Result<std::unique_ptr<Communicator>>> Connect(std::vector<TcpOptions> options,
                                                           int world,
                                                           const std::string& coordinator,
                                                           Deadline deadline) {
  std::vector<Result<std::unique_ptr<Communicator>>> out;
  for (int r = 0; r < world; ++r) out.emplace_back(InternalError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      out[r] = MakeTcpTransport(options[r])->Connect({r, world, coordinator}, deadline);
    });
  for (auto& t : threads) t.join();
  return out;
}

Comms Formed(std::vector<Result<std::unique_ptr<Communicator>>> results) {
  Comms comms;
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    if (!results[r].ok()) return {};
    comms.push_back(core::WithRingCollectives(std::move(*results[r])));
  }
  return comms;
}

// Every rank sums rank + 1 `times` times and must get n(n+1)/2.
void ExpectAllReduceWorks(Comms& comms, int times = 1) {
  const int n = static_cast<int>(comms.size());
  std::vector<Status> statuses(comms.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      for (int i = 0; i < times && statuses[r].ok(); ++i) {
        std::vector<float> v(10000, static_cast<float>(r + 1));
        statuses[r] = comms[r]->AllReduce(v, ReduceOp::kSum, DeadlineIn(60s));
        if (statuses[r].ok() && v.back() != n * (n + 1) / 2.0f)
          statuses[r] = InternalError("wrong sum " + std::to_string(v.back()));
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

int64_t Milliseconds(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// The sum of N over the lines "dropped N connection(s) that did not authenticate" in `log`, and
// how many such lines there are.
std::pair<int64_t, int> Dropped(const std::string& log) {
  static const std::regex line("dropped ([0-9]+) connection\\(s\\) that did not authenticate");
  std::pair<int64_t, int> out{0, 0};
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it) {
    out.first += std::stoll((*it)[1]);
    ++out.second;
  }
  return out;
}

// Ranks 1 and 2 join the group of 3 that rank 0 (running on *t0, joined here) forms at
// `coordinator`; returns the three communicators that formed.
Comms JoinRanks1And2(Transport& transport, const std::string& coordinator, std::thread* t0,
                     std::optional<Result<std::unique_ptr<Communicator>>>* rank0,
                     std::chrono::seconds deadline) {
  std::vector<Result<std::unique_ptr<Communicator>>> others;
  others.emplace_back(InternalError("not run"));
  others.emplace_back(InternalError("not run"));
  std::thread t1([&] { others[0] = transport.Connect({1, 3, coordinator}, DeadlineIn(deadline)); });
  std::thread t2([&] { others[1] = transport.Connect({2, 3, coordinator}, DeadlineIn(deadline)); });
  t1.join();
  t2.join();
  t0->join();
  std::vector<Result<std::unique_ptr<Communicator>>> all;
  all.push_back(std::move(**rank0));
  for (auto& r : others) all.push_back(std::move(r));
  return Formed(std::move(all));
}

struct FloodCase {
  Flood::Kind kind;
  int connections;
};

class DuringFormation : public ::testing::TestWithParam<FloodCase> {};

// A flood held on the coordinator's port once rank 0 listens, until the group has formed: ranks
// 1 and 2 join (their handshakes shed the flood's, and are retried if shed themselves), the three
// form and compute; rank 0 reports the drops in one line, not one per connection. The time logged
// is from ranks 1 and 2 starting, with the flood in place, to all three formed.
TEST_P(DuringFormation, TheGroupFormsAndComputes) {
  const FloodCase c = GetParam();
  const std::string coordinator = FreeCoordinator();
  TcpOptions options = HostileOptions();
  options.drop_report_interval = 600s;  // one line, when rank 0 ends
  CapturedStderr captured;
  const auto transport = MakeTcpTransport(options);
  std::optional<Result<std::unique_ptr<Communicator>>> rank0;
  std::thread t0([&] { rank0 = transport->Connect({0, 3, coordinator}, DeadlineIn(120s)); });
  std::optional<Flood> flood;
  if (c.connections > 0) {
    flood.emplace(PortOf(coordinator), c.connections, c.kind);
    for (int i = 0; i < 3000 && flood->opened() < c.connections; ++i)
      std::this_thread::sleep_for(10ms);
    EXPECT_GE(flood->opened(), c.connections) << "the flood never got its connections open";
  }
  const auto start = Clock::now();
  Comms comms = JoinRanks1And2(*transport, coordinator, &t0, &rank0, 60s);
  const auto took = Clock::now() - start;
  ASSERT_EQ(comms.size(), 3u);
  ExpectAllReduceWorks(comms);
  const int64_t opened = flood ? flood->opened() : 0, cut = flood ? flood->cut() : 0;
  flood.reset();
  comms.clear();  // rank 0 reports its drops as it ends
  const std::string log = captured.Restore();
  std::cout << "[hostile] formation of 3 ranks with " << c.connections << " " << Flood::Name(c.kind)
            << " connection(s) held open to the coordinator: " << Milliseconds(took)
            << " ms (the flood opened " << opened << ", rank 0 closed " << cut << ")\n";
  RecordProperty("formation_ms", std::to_string(Milliseconds(took)));
  const auto [dropped, lines] = Dropped(log);
  if (c.connections == 0) {
    EXPECT_EQ(lines, 0) << log;
    return;
  }
  // Every connection the flood saw closed was dropped and counted, in one line (the interval
  // outlasts the test). Those still open when the flood stopped may count too.
  EXPECT_GE(dropped, cut) << log;
  EXPECT_EQ(lines, 1) << log;
}

INSTANTIATE_TEST_SUITE_P(Hostile, DuringFormation,
                         ::testing::Values(FloodCase{Flood::Kind::kSilent, 0},
                                           FloodCase{Flood::Kind::kSilent, 100},
                                           FloodCase{Flood::Kind::kSilent, 1000},
                                           FloodCase{Flood::Kind::kSlowloris, 200},
                                           FloodCase{Flood::Kind::kRandomBytes, 300},
                                           FloodCase{Flood::Kind::kOversizedLength, 300}),
                         [](const auto& info) {
                           return std::string(Flood::Name(info.param.kind)) + "_" +
                                  std::to_string(info.param.connections);
                         });

// A flood of silent connections from 64 loopback addresses (127.0.0.2 to .65, one each at a
// time: every address ties) held on the coordinator, with at most 48 handshakes pending, so
// nearly every accept sheds one. A handshake from 127.0.0.1 stays in its authenticating stage
// (hello sent, challenge read) while the flood is shed 200 times more: it still gets its verdict
// (a tie once went to the lexicographically first address, 127.0.0.1, and cut it at the next
// accept). Then ranks 1 and 2 join from 127.0.0.1, the group forms and computes, and rank 0's
// line names the many sources.
TEST(Hostile, AFloodFromManyLoopbackAddressesShedsItselfNotAHandshakeAuthenticating) {
  const std::string coordinator = FreeCoordinator();
  TcpOptions options = HostileOptions();
  options.max_pending_handshakes = 48;
  options.handshake_timeout = 10000ms;  // the authenticating one waits for the flood's sheds
  options.drop_report_interval = 600s;
  CapturedStderr captured;
  const auto transport = MakeTcpTransport(options);
  std::optional<Result<std::unique_ptr<Communicator>>> rank0;
  std::thread t0([&] { rank0 = transport->Connect({0, 3, coordinator}, DeadlineIn(120s)); });
  std::vector<std::string> sources;
  for (int i = 2; i < 66; ++i) sources.push_back("127.0.0." + std::to_string(i));
  std::optional<Flood> flood;
  flood.emplace(PortOf(coordinator), 64, Flood::Kind::kSilent, "127.0.0.1", sources);
  for (int i = 0; i < 3000 && flood->cut() < 64; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(flood->cut(), 64) << "the flood was never shed: is it over the bound?";

  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  tcp::socket authenticating(io);
  const Endpoint at{"127.0.0.1", PortOf(coordinator)};
  // World size 4: authenticated, then refused, so the group's own rank 1 keeps its place.
  const auto hello = EncodeHello({Purpose::kJoin, 1, 4, *FreshNonce(), {}});
  std::array<std::byte, kChallengeBytes> challenge;
  // Until the hello is read, a connection is as silent as the flood's, and as old as the
  // newest of them: cut after 48 more accepts, it tries again, as a rank does.
  bool challenged = false;
  for (int attempt = 0; attempt < 100 && !challenged; ++attempt) {
    authenticating.close();
    ASSERT_TRUE(ConnectWithRetry(io, authenticating, at, "rank 0", DeadlineIn(10s)).ok());
    challenged = WriteAll(io, authenticating, hello, "rank 0", DeadlineIn(10s)).ok() &&
                 ReadExact(io, authenticating, challenge, "rank 0", DeadlineIn(10s)).ok();
  }
  ASSERT_TRUE(challenged) << "no hello of 100 was answered";
  const int64_t cut_before = flood->cut();
  for (int i = 0; i < 5000 && flood->cut() < cut_before + 200; ++i)
    std::this_thread::sleep_for(1ms);
  EXPECT_GE(flood->cut(), cut_before + 200) << "the flood stopped churning";
  const auto response = EncodeResponse(*ClientMac(options.secret, hello, challenge));
  ASSERT_TRUE(WriteAll(io, authenticating, response, "rank 0", DeadlineIn(10s)).ok());
  Result<Control> verdict = ReadControl(io, authenticating, "rank 0", DeadlineIn(10s));
  EXPECT_THAT(verdict.status().message(), HasSubstr("has world size 4"))
      << "the handshake authenticating was shed";
  authenticating.close();

  const auto start = Clock::now();
  Comms comms = JoinRanks1And2(*transport, coordinator, &t0, &rank0, 30s);
  const auto took = Clock::now() - start;
  ASSERT_EQ(comms.size(), 3u);
  ExpectAllReduceWorks(comms, 3);
  const int64_t opened = flood->opened(), cut = flood->cut();
  flood.reset();
  comms.clear();
  work.reset();
  io_thread.join();
  const std::string log = captured.Restore();
  std::cout << "[hostile] formation of 3 ranks with 64 silent connections from 64 loopback "
               "addresses held open to the coordinator (48 pending at most): "
            << Milliseconds(took) << " ms (the flood opened " << opened << ", rank 0 closed " << cut
            << ")\n";
  const auto [dropped, lines] = Dropped(log);
  EXPECT_GE(dropped, cut) << log;
  EXPECT_THAT(log, HasSubstr(" more address(es)):"));  // from many sources indeed
}

// After formation: floods at rank 0's port and at rank 1's listener while the group computes.
TEST(Hostile, AFloodWhileTheGroupComputesStopsNothing) {
  const std::string coordinator = FreeCoordinator();
  std::vector<TcpOptions> options(3, HostileOptions());
  for (auto& o : options) o.drop_report_interval = 600s;
  const int listener = FreePort();
  options[1].listen_port = listener;
  CapturedStderr captured;
  Comms comms = Formed(Connect(options, 3, coordinator, DeadlineIn(60s)));
  ASSERT_EQ(comms.size(), 3u);
  int64_t cut = 0;
  {
    Flood at_coordinator(PortOf(coordinator), 300, Flood::Kind::kSilent);
    Flood at_rank1(static_cast<uint16_t>(listener), 300, Flood::Kind::kRandomBytes);
    const auto start = Clock::now();
    // Until each flood was turned away at least 300 times, computing all along.
    for (int round = 0; round < 1000 && (at_coordinator.cut() < 300 || at_rank1.cut() < 300);
         ++round)
      ExpectAllReduceWorks(comms, 5);
    EXPECT_GE(at_coordinator.cut(), 300);
    EXPECT_GE(at_rank1.cut(), 300);
    cut = at_coordinator.cut() + at_rank1.cut();
    std::cout << "[hostile] 3 ranks computed on while 600 hostile connections were held open to "
                 "rank 0 and rank 1 ("
              << cut << " turned away in " << Milliseconds(Clock::now() - start) << " ms)\n";
  }
  ExpectAllReduceWorks(comms);
  comms.clear();
  const auto [dropped, lines] = Dropped(captured.Restore());
  EXPECT_GE(dropped, cut);
  EXPECT_EQ(lines, 2);  // rank 0 and rank 1, one line each
}

// A recorded handshake that the coordinator authenticated (then refused: another world size),
// replayed on a new connection: its MAC answers an old nonce, so it is dropped unanswered.
TEST(Hostile, AReplayedHandshakeIsDropped) {
  const std::string coordinator = FreeCoordinator();
  const TcpOptions options = HostileOptions();
  std::optional<Result<std::unique_ptr<Communicator>>> rank0;
  std::thread t0([&] {
    rank0 = MakeTcpTransport(options)->Connect({0, 2, coordinator}, DeadlineIn(60s));
  });
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  const Endpoint at{"127.0.0.1", PortOf(coordinator)};

  tcp::socket original(io);
  ASSERT_TRUE(ConnectWithRetry(io, original, at, "rank 0", DeadlineIn(10s)).ok());
  const auto hello = EncodeHello({Purpose::kJoin, 1, 3, *FreshNonce(), {}});
  ASSERT_TRUE(WriteAll(io, original, hello, "rank 0", DeadlineIn(10s)).ok());
  std::array<std::byte, kChallengeBytes> challenge;
  ASSERT_TRUE(ReadExact(io, original, challenge, "rank 0", DeadlineIn(10s)).ok());
  const auto response = EncodeResponse(*ClientMac(options.secret, hello, challenge));
  ASSERT_TRUE(WriteAll(io, original, response, "rank 0", DeadlineIn(10s)).ok());
  Result<Control> verdict = ReadControl(io, original, "rank 0", DeadlineIn(10s));
  EXPECT_THAT(verdict.status().message(), HasSubstr("has world size 3"));  // authenticated

  tcp::socket replay(io);
  ASSERT_TRUE(ConnectWithRetry(io, replay, at, "rank 0", DeadlineIn(10s)).ok());
  ASSERT_TRUE(WriteAll(io, replay, hello, "replay", DeadlineIn(10s)).ok());
  ASSERT_TRUE(ReadExact(io, replay, challenge, "replay", DeadlineIn(10s)).ok());
  ASSERT_TRUE(WriteAll(io, replay, response, "replay", DeadlineIn(10s)).ok());
  std::array<std::byte, 1> anything;
  Status unanswered = ReadExact(io, replay, anything, "replay", DeadlineIn(10s));
  EXPECT_EQ(unanswered.code(), StatusCode::kUnavailable) << "the replay got an answer";

  const auto start = Clock::now();
  auto rank1 = MakeTcpTransport(options)->Connect({1, 2, coordinator}, DeadlineIn(60s));
  t0.join();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE(rank0->ok()) << rank0->status();
  std::cout << "[hostile] rank 1 formed the group " << Milliseconds(Clock::now() - start)
            << " ms after a replayed handshake was dropped\n";
  Comms comms;
  comms.push_back(core::WithRingCollectives(std::move(**rank0)));
  comms.push_back(core::WithRingCollectives(std::move(*rank1)));
  ExpectAllReduceWorks(comms);
  work.reset();
  io_thread.join();
}

// A rank of an earlier job at the same port with the same secret: it learned that job's nonce
// when it joined, so it and the coordinator of the new job refuse each other, naming why, and the
// new job's own rank 1 takes the place. A connection of the old job to a rank's listener too.
TEST(Hostile, ARankOfAnEarlierJobIsRefusedAndDisplacesNoMember) {
  CapturedStderr captured;
  const std::string coordinator = FreeCoordinator();
  std::vector<TcpOptions> options(2, HostileOptions());
  const int listener = FreePort();
  options[1].listen_port = listener;
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  const Endpoint at{"127.0.0.1", PortOf(coordinator)};

  // The earlier job: its rank 0 waits for a rank 1 that authenticates (learning the job) and
  // then goes away; that rank 0 gives up.
  Nonce earlier_job{};
  {
    std::thread earlier([&] {
      auto r = MakeTcpTransport(options[0])->Connect({0, 2, coordinator}, DeadlineIn(1500ms));
      EXPECT_FALSE(r.ok());
    });
    tcp::socket s(io);
    ASSERT_TRUE(ConnectWithRetry(io, s, at, "earlier rank 0", DeadlineIn(10s)).ok());
    Result<Nonce> job =
        ClientHandshake(io, s, options[0].secret, {Purpose::kJoin, 1, 2, *FreshNonce(), {}}, 0,
                        "earlier rank 0", DeadlineIn(10s));
    ASSERT_TRUE(job.ok()) << job.status();
    earlier_job = *job;
    earlier.join();
  }
  ASSERT_FALSE(IsZero(earlier_job));

  // The new job at the same port: the stale rank 1 arrives first.
  std::optional<Result<std::unique_ptr<Communicator>>> rank0;
  std::thread t0([&] {
    rank0 = MakeTcpTransport(options[0])->Connect({0, 2, coordinator}, DeadlineIn(60s));
  });
  tcp::socket stale(io);
  ASSERT_TRUE(ConnectWithRetry(io, stale, at, "rank 0", DeadlineIn(10s)).ok());
  Result<Nonce> refused = ClientHandshake(io, stale, options[0].secret,
                                          {Purpose::kJoin, 1, 2, *FreshNonce(), earlier_job}, 0,
                                          "rank 0", DeadlineIn(10s));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status();
  // It refuses the new coordinator itself (which refuses it in turn, in its log).
  EXPECT_THAT(
      refused.status().message(),
      HasSubstr("tcp rank 1 refused a coordinator of another group of its job (job nonce "));
  EXPECT_THAT(refused.status().message(), HasSubstr("this rank's " + ShortHex(earlier_job)));

  const auto start = Clock::now();
  auto rank1 = MakeTcpTransport(options[1])->Connect({1, 2, coordinator}, DeadlineIn(60s));
  t0.join();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE(rank0->ok()) << rank0->status();
  std::cout << "[hostile] the new job formed " << Milliseconds(Clock::now() - start)
            << " ms after a rank of the earlier job was refused\n";
  // Logged by the coordinator's io thread before it took the new rank 1's join.
  EXPECT_THAT(captured.Restore(),
              HasSubstr(": rank 1 belongs to another job (job " + ShortHex(earlier_job)));

  // The earlier job's rank at rank 1's listener, as a sending connection of "rank 0".
  tcp::socket to_listener(io);
  ASSERT_TRUE(ConnectWithRetry(io, to_listener, {"127.0.0.1", static_cast<uint16_t>(listener)},
                               "rank 1", DeadlineIn(10s))
                  .ok());
  Result<Nonce> data = ClientHandshake(io, to_listener, options[0].secret,
                                       {Purpose::kData, 0, 2, *FreshNonce(), earlier_job}, 1,
                                       "rank 1", DeadlineIn(10s));
  EXPECT_THAT(data.status().message(),
              HasSubstr("tcp rank 0 refused rank 1 of another group of its job"));

  Comms comms;
  comms.push_back(core::WithRingCollectives(std::move(**rank0)));
  comms.push_back(core::WithRingCollectives(std::move(*rank1)));
  ExpectAllReduceWorks(comms);
  work.reset();
  io_thread.join();
}

// A peer with the secret whose join claims a 4 GiB body: dropped, naming the length, and it took
// no place; the real rank 1 joins.
TEST(Hostile, AnOversizedJoinIsDroppedAndTakesNoPlace) {
  const std::string coordinator = FreeCoordinator();
  const TcpOptions options = HostileOptions();
  CapturedStderr captured;
  std::optional<Result<std::unique_ptr<Communicator>>> rank0;
  std::thread t0([&] {
    rank0 = MakeTcpTransport(options)->Connect({0, 2, coordinator}, DeadlineIn(60s));
  });
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  tcp::socket s(io);
  ASSERT_TRUE(
      ConnectWithRetry(io, s, {"127.0.0.1", PortOf(coordinator)}, "rank 0", DeadlineIn(10s)).ok());
  ASSERT_TRUE(ClientHandshake(io, s, options.secret, {Purpose::kJoin, 1, 2, *FreshNonce(), {}}, 0,
                              "rank 0", DeadlineIn(10s))
                  .ok());
  auto header = EncodeControl(ControlType::kJoin, {});
  for (size_t i = 8; i < 12; ++i) header[i] = std::byte{0xff};  // length 2^32 - 1
  ASSERT_TRUE(WriteAll(io, s, header, "rank 0", DeadlineIn(10s)).ok());
  std::array<std::byte, 1> anything;
  EXPECT_EQ(ReadExact(io, s, anything, "rank 0", DeadlineIn(10s)).code(), StatusCode::kUnavailable);

  auto rank1 = MakeTcpTransport(options)->Connect({1, 2, coordinator}, DeadlineIn(60s));
  t0.join();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE(rank0->ok()) << rank0->status();
  EXPECT_THAT(captured.Restore(), HasSubstr("body of 4294967295 bytes exceeds the limit"));
  work.reset();
  io_thread.join();
}

}  // namespace
}  // namespace reel::tcp::testing
