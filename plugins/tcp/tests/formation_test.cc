// Forming tcp groups: what is missing is named, strangers and garbage cannot get in, and the
// group they tried to disturb works on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "blocking_io.h"
#include "reel/core/collectives.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

using Comms = std::vector<std::unique_ptr<Communicator>>;

// Connects ranks `ranks` of a world of `world` on threads; one result per listed rank.
std::vector<Result<std::unique_ptr<Communicator>>> ConnectRanks(Transport& transport,
                                                                std::vector<int> ranks, int world,
                                                                const std::string& coordinator,
                                                                Deadline deadline) {
  std::vector<Result<std::unique_ptr<Communicator>>> out;
  for (size_t i = 0; i < ranks.size(); ++i) out.emplace_back(InternalError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      out[i] = transport.Connect({ranks[i], world, coordinator}, deadline);
    });
  for (auto& t : threads) t.join();
  return out;
}

Comms WithCollectives(Comms raw) {
  Comms comms;
  for (auto& c : raw) comms.push_back(core::WithRingCollectives(std::move(c)));
  return comms;
}

// Every rank sums its rank + 1 over the group and must get n(n+1)/2.
void ExpectAllReduceWorks(Comms& comms) {
  const int n = static_cast<int>(comms.size());
  std::vector<Status> statuses(comms.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> v(100000, static_cast<float>(r + 1));
      statuses[r] = comms[r]->AllReduce(v, ReduceOp::kSum, DeadlineIn(60s));
      if (statuses[r].ok() && v.back() != n * (n + 1) / 2.0f)
        statuses[r] = InternalError("wrong sum " + std::to_string(v.back()));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

TEST(TcpFormation, NamesTheRanksThatNeverArrived) {
  auto transport = MakeTcpTransport(TestOptions());
  auto results = ConnectRanks(*transport, {0, 1, 3}, 5, FreeCoordinator(), DeadlineIn(1500ms));
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_FALSE(results[i].ok()) << "rank index " << i;
    EXPECT_THAT(results[i].status().message(), HasSubstr("rank(s) 2, 4 never arrived"))
        << results[i].status();
  }
  EXPECT_EQ(results[0].status().code(), StatusCode::kDeadlineExceeded) << results[0].status();
}

TEST(TcpFormation, NamesAMissingCoordinator) {
  auto transport = MakeTcpTransport(TestOptions());
  auto results = ConnectRanks(*transport, {1, 2}, 3, FreeCoordinator(), DeadlineIn(500ms));
  for (auto& r : results) {
    EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("rank 0 (the coordinator) at 127.0.0.1:"));
  }
}

TEST(TcpFormation, RefusesWhatItCannotDiscoverOrParse) {
  auto transport = MakeTcpTransport(TestOptions());
  auto rank = transport->Connect({kDiscover, 2, "127.0.0.1:1"}, DeadlineIn(1s));
  EXPECT_EQ(rank.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(rank.status().message(),
              AllOf(HasSubstr("the rank must be given"), HasSubstr("REEL_RANK")));
  auto world = transport->Connect({0, kDiscover, "127.0.0.1:1"}, DeadlineIn(1s));
  EXPECT_THAT(world.status().message(), HasSubstr("the world size must be given"));
  auto no_coordinator = transport->Connect({1, 2, ""}, DeadlineIn(1s));
  EXPECT_EQ(no_coordinator.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no_coordinator.status().message(), HasSubstr("REEL_COORDINATOR"));
  for (const char* bad : {"localhost", "::1:80", "host:0", "host:99999", "host:http", "[::1:80"}) {
    auto r = transport->Connect({0, 2, bad}, DeadlineIn(1s));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(bad));
  }
  // One rank needs no network at all.
  auto alone = transport->Connect({0, 1, ""}, DeadlineIn(1s));
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ((*alone)->size(), 1);
}

TEST(TcpOptions, AllReduceSpinIsBoundedAndNamedWhenOutOfRange) {
  for (const char* bad : {"-2", "1000001"}) {
    Result<Options> parsed = ParseOptions(TcpOptionSchema(), {{"allreduce_spin_us", bad}});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    Result<TcpOptions> o = TcpOptionsFrom(*parsed);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(o.status().message(), HasSubstr("'allreduce_spin_us': " + std::string(bad)));
  }
  // Unset and -1 leave the choice to the group (automatic), 0 and N fix it.
  for (const auto& [given, want] : std::vector<
           std::pair<std::map<std::string, std::string>, std::optional<std::chrono::microseconds>>>{
           {{}, std::nullopt},
           {{{"allreduce_spin_us", "-1"}}, std::nullopt},
           {{{"allreduce_spin_us", "0"}}, std::chrono::microseconds(0)},
           {{{"allreduce_spin_us", "20000"}}, std::chrono::microseconds(20000)}}) {
    Result<Options> parsed = ParseOptions(TcpOptionSchema(), given);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    Result<TcpOptions> o = TcpOptionsFrom(*parsed);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->allreduce_spin, want);
  }
}

TEST(TcpFormation, NonLoopbackListenerNeedsASecret) {
  TcpOptions o = TestOptions();
  o.secret.clear();
  o.listen_address = "0.0.0.0";
  auto transport = MakeTcpTransport(o);
  auto r = transport->Connect({0, 2, FreeCoordinator()}, DeadlineIn(1s));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("REEL_SECRET"));
}

TEST(TcpFormation, ARankWithAnotherSecretIsRefusedAndNamed) {
  const std::string coordinator = FreeCoordinator();
  auto good = MakeTcpTransport(TestOptions());
  TcpOptions wrong_options = TestOptions();
  wrong_options.secret = "not the secret";
  auto wrong = MakeTcpTransport(wrong_options);
  Result<std::unique_ptr<Communicator>> r0 = InternalError("not run"),
                                        r1 = InternalError("not run");
  std::thread t0([&] { r0 = good->Connect({0, 2, coordinator}, DeadlineIn(1500ms)); });
  std::thread t1([&] { r1 = wrong->Connect({1, 2, coordinator}, DeadlineIn(1500ms)); });
  t0.join();
  t1.join();
  EXPECT_EQ(r1.status().code(), StatusCode::kPermissionDenied) << r1.status();
  EXPECT_THAT(r1.status().message(),
              HasSubstr("rank 0 (the coordinator) could not prove the shared secret"));
  EXPECT_THAT(r0.status().message(), HasSubstr("rank(s) 1 never arrived")) << r0.status();
}

// A stranger's attempts while a group forms: garbage, a connection that never speaks, a hello
// followed by a forged response, and a client with the wrong secret. The group forms and works.
TEST(TcpFormation, StrangersAndGarbageAreDroppedWhileTheGroupForms) {
  TcpOptions options = TestOptions();
  options.handshake_timeout = 300ms;
  auto transport = MakeTcpTransport(options);
  const std::string coordinator = FreeCoordinator();
  Result<Endpoint> at = ParseHostPort(coordinator, "test");
  ASSERT_TRUE(at.ok());

  std::vector<Result<std::unique_ptr<Communicator>>> early;
  std::thread first_two([&] {
    early = ConnectRanks(*transport, {0, 1}, 3, coordinator, DeadlineIn(60s));
  });

  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  auto connect = [&](tcp::socket& s) {
    ASSERT_TRUE(ConnectWithRetry(io, s, *at, "rank 0", DeadlineIn(10s)).ok());
  };
  std::mt19937 random(7);
  std::vector<std::byte> garbage(4096);
  for (auto& b : garbage) b = static_cast<std::byte>(random());
  tcp::socket noise(io), silent(io), forger(io), stranger(io);
  connect(noise);
  connect(silent);
  connect(forger);
  // Garbage: dropped at once (bad magic), so the write may or may not complete; either is fine.
  (void)WriteAll(io, noise, garbage, "noise", DeadlineIn(5s));
  // A forged response: a valid hello, then a MAC made without the secret.
  Hello hello{Purpose::kData, 2, 3, *FreshNonce()};
  ASSERT_TRUE(WriteAll(io, forger, EncodeHello(hello), "forger", DeadlineIn(5s)).ok());
  std::array<std::byte, kChallengeBytes> challenge;
  ASSERT_TRUE(ReadExact(io, forger, challenge, "forger", DeadlineIn(5s)).ok());
  ASSERT_TRUE(WriteAll(io, forger, EncodeResponse(Mac{}), "forger", DeadlineIn(5s)).ok());
  std::array<std::byte, 1> verdict;
  Status forged = ReadExact(io, forger, verdict, "forger", DeadlineIn(30s));
  EXPECT_EQ(forged.code(), StatusCode::kUnavailable) << "the forger got a verdict: " << forged;
  // The wrong secret: the client sees that rank 0 cannot prove *its* secret and gives up.
  ASSERT_TRUE(ConnectWithRetry(io, stranger, *at, "rank 0", DeadlineIn(10s)).ok());
  Status s = ClientHandshake(io, stranger, "guess", Hello{Purpose::kData, 2, 3, *FreshNonce()}, 0,
                             "rank 0", DeadlineIn(10s))
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s;
  // The silent one is closed after handshake_timeout.
  Status silence = ReadExact(io, silent, verdict, "silent", DeadlineIn(30s));
  EXPECT_EQ(silence.code(), StatusCode::kUnavailable) << silence;

  auto last = transport->Connect({2, 3, coordinator}, DeadlineIn(60s));
  first_two.join();
  ASSERT_TRUE(last.ok()) << last.status();
  Comms comms;
  for (auto& r : early) {
    ASSERT_TRUE(r.ok()) << r.status();
    comms.push_back(std::move(*r));
  }
  comms.push_back(std::move(*last));
  comms = WithCollectives(std::move(comms));
  ExpectAllReduceWorks(comms);

  // After formation too: garbage at rank 0's port while the group computes.
  tcp::socket late(io);
  connect(late);
  (void)WriteAll(io, late, garbage, "late noise", DeadlineIn(5s));
  ExpectAllReduceWorks(comms);
  work.reset();
  io_thread.join();
}

// Two processes started with the same rank: one of them is told why it is refused (before the
// group formed: the rank has already joined; after: the rendezvous is closed).
TEST(TcpFormation, ATwiceUsedRankIsRefused) {
  auto transport = MakeTcpTransport(TestOptions());
  auto results = ConnectRanks(*transport, {0, 1, 1}, 2, FreeCoordinator(), DeadlineIn(2s));
  int ok = 0;
  for (auto& r : results) {
    if (r.ok()) {
      ++ok;
      continue;
    }
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("tcp rank 0 refuses: "));
  }
  EXPECT_EQ(ok, 2);
}

// Choices made from the host (how AllReduce waits, the congestion control on loopback) are alike
// for every rank a process runs (trainer.local_ranks): said once per process and group, not once
// per rank; a later group says them again.
TEST(TcpFormation, HostChoicesAreLoggedOncePerProcessAndGroup) {
  auto count = [](const std::string& log, const std::string& what) {
    size_t n = 0;
    for (size_t at = 0; (at = log.find(what, at)) != std::string::npos; at += what.size()) ++n;
    return n;
  };
  for (int group = 0; group < 2; ++group) {
    CapturedStderr captured;
    TcpOptions options = TestOptions();
    options.allreduce_spin.reset();       // the automatic choice, logged
    options.congestion_control = "reno";  // a given choice, logged
    conformance::Communicators comms = Group(3, options);
    const std::string log = captured.Restore();
    ASSERT_EQ(comms.size(), 3u);
    EXPECT_EQ(count(log, "reel tcp: AllReduce waits by "), 1u) << "group " << group << ":\n" << log;
    EXPECT_EQ(count(log, "reel tcp: sending connections"), 1u) << "group " << group << ":\n" << log;
    EXPECT_EQ(count(log, "AllReduce waits by"), 1u) << log;
  }
}

// A name that appears only later (a Kubernetes service, a pod's DNS record) is looked up again
// until it resolves; one that never does fails at the deadline naming it and the resolver's error.
TEST(ResolveHost, ANameThatAppearsLaterResolves) {
  auto lookups = std::make_shared<std::atomic<int>>(0);
  auto late = [lookups](const std::string& host) -> Result<std::vector<asio::ip::address>> {
    if (++*lookups < 4)
      return UnavailableError("cannot resolve host '" + host + "': Host not found");
    return std::vector<asio::ip::address>{asio::ip::make_address("127.0.0.1")};
  };
  Result<asio::ip::address> a = ResolveHost("rank-0.job.svc", DeadlineIn(60s), late);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, asio::ip::make_address("127.0.0.1"));
  EXPECT_EQ(lookups->load(), 4);
}

TEST(ResolveHost, ANameThatNeverResolvesFailsAtTheDeadlineNamingItAndTheLastError) {
  auto lookups = std::make_shared<std::atomic<int>>(0);
  auto never = [lookups](const std::string& host) -> Result<std::vector<asio::ip::address>> {
    return UnavailableError("cannot resolve host '" + host + "': try " +
                            std::to_string(++*lookups));
  };
  Result<asio::ip::address> a = ResolveHost("nowhere.invalid", DeadlineIn(2s), never);
  EXPECT_EQ(a.status().code(), StatusCode::kDeadlineExceeded) << a.status();
  const int tries = lookups->load();
  EXPECT_GT(tries, 1);
  EXPECT_THAT(a.status().message(),
              HasSubstr("looking up host 'nowhere.invalid' found no address before the deadline (" +
                        std::to_string(tries) +
                        " lookup(s); last: cannot resolve host "
                        "'nowhere.invalid': try " +
                        std::to_string(tries) + ")"));
}

}  // namespace
}  // namespace reel::tcp::testing
