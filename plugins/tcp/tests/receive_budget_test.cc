// The receive budget over real connections: what a rank holds of one peer's messages for
// receives that have not asked for them stays within the budget (plus one read's chunk) on every
// read path, TCP's flow control holds the sender back meanwhile, and every message arrives.
// Also the option's range, and a peer whose frame claims more than any message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "tcp_communicator.h"
#include "tcp_test_util.h"

namespace reel::tcp {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr size_t kMessage = size_t{256} << 10;
constexpr int kMessages = 200;  // 50 MiB, far beyond the budget and the kernel's buffers
constexpr uint64_t kBudget = uint64_t{1} << 20;

std::vector<std::byte> Payload(int i, size_t bytes = kMessage) {
  std::vector<std::byte> p(bytes);
  for (size_t j = 0; j < p.size(); j += 4096) p[j] = std::byte(i + j / 4096);
  return p;
}

// Bare tcp communicators (testing::Group adds the core's collectives around them), as threads.
std::vector<std::unique_ptr<Communicator>> Form(int n, const TcpOptions& options,
                                                bool isolate_failures = false) {
  auto transport = MakeTcpTransport(options);
  const std::string coordinator = testing::FreeCoordinator();
  std::vector<Result<std::unique_ptr<Communicator>>> joined;
  for (int r = 0; r < n; ++r) joined.emplace_back(InternalError("not run"));
  std::vector<std::thread> joining;
  for (int r = 0; r < n; ++r)
    joining.emplace_back([&, r] {
      joined[r] = transport->Connect({r, n, coordinator, isolate_failures}, DeadlineIn(60s));
    });
  for (auto& t : joining) t.join();
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& j : joined) {
    EXPECT_TRUE(j.ok()) << j.status();
    if (!j.ok()) return {};
    comms.push_back(std::move(*j));
  }
  return comms;
}

// The most `receiver` held of `peer`'s messages while it watched (TcpCommunicator::HeldBytes).
class HeldWatch {
 public:
  HeldWatch(const Communicator& receiver, int peer)
      : receiver_(static_cast<const TcpCommunicator&>(receiver)), peer_(peer) {
    thread_ = std::thread([this] {
      while (!done_.load()) {
        const uint64_t held = receiver_.HeldBytes(peer_);
        if (held > most_.load()) most_.store(held);
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  ~HeldWatch() { Stop(); }
  uint64_t Stop() {
    if (thread_.joinable()) {
      done_.store(true);
      thread_.join();
    }
    return most_.load();
  }
  uint64_t most() const { return most_.load(); }
  // Waits until the receiver holds at least `bytes` (the peer filled the budget).
  bool AwaitHeld(uint64_t bytes) const {
    for (int i = 0; i < 60000 && receiver_.HeldBytes(peer_) < bytes; ++i)
      std::this_thread::sleep_for(1ms);
    return receiver_.HeldBytes(peer_) >= bytes;
  }

 private:
  const TcpCommunicator& receiver_;
  const int peer_;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> most_{0};
  std::thread thread_;
};

// This process's resident memory, from /proc/self/status (0 where there is none).
uint64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

TEST(ReceiveBudget, AFastSenderCannotGrowTheReceiversQueuePastTheBudget) {
  TcpOptions options = testing::TestOptions();
  options.receive_budget_bytes = kBudget;
  auto comms = Form(2, options);
  ASSERT_EQ(comms.size(), 2u);
  HeldWatch watch(*comms[0], 1);
  std::thread sender([&] {
    for (int i = 0; i < kMessages; ++i)
      ASSERT_TRUE(comms[1]->Send(0, 3, Payload(i), DeadlineIn(120s)).ok());
  });
  // The receiver looks away while the sender could have sent everything many times over.
  std::this_thread::sleep_for(1s);
  const uint64_t while_away = watch.most();
  for (int i = 0; i < kMessages; ++i) {
    Result<Message> m = comms[0]->Recv(1, 3, DeadlineIn(120s));
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->payload, Payload(i)) << "message " << i;
  }
  sender.join();
  // Read a chunk at most at a time, a read that crosses the budget is the most it can pass it by.
  EXPECT_LE(watch.Stop(), kBudget + kMessage)
      << "most held while the receiver looked away: " << while_away;
  EXPECT_GT(while_away, 0u) << "the sender sent nothing in a second";
}

// One peer sends two 64 MiB messages under a 1 MiB budget while another sends many small ones.
// The message arriving used to be staged whole, whatever the budget: now the receiver holds at
// most the budget plus one chunk of it until a receive asks for it, then a Recv (whose message
// is staged for it: the receiver asked for those bytes) and a RecvInto (read straight into its
// buffer, nothing held) each get theirs whole; the other peer's messages all arrive meanwhile.
TEST(ReceiveBudget, AMessageLargerThanTheBudgetWaitsInTheKernelUntilAReceiveAsks) {
  TcpOptions options = testing::TestOptions();
  options.receive_budget_bytes = kBudget;
  auto comms = Form(3, options);
  ASSERT_EQ(comms.size(), 3u);
  constexpr size_t kLarge = size_t{64} << 20;
  const std::vector<std::byte> first = testing::Pattern(kLarge, 1),
                               second = testing::Pattern(kLarge, 2);
  const uint64_t rss_before = ResidentBytes();
  HeldWatch watch(*comms[0], 1);
  std::thread large([&] {
    EXPECT_TRUE(comms[1]->Send(0, 7, first, DeadlineIn(120s)).ok());
    EXPECT_TRUE(comms[1]->Send(0, 7, second, DeadlineIn(120s)).ok());
  });
  constexpr int kSmall = 64;
  std::thread small([&] {
    for (int i = 0; i < kSmall; ++i)
      EXPECT_TRUE(comms[2]->Send(0, 8, Payload(i, 64 << 10), DeadlineIn(120s)).ok());
  });
  ASSERT_TRUE(watch.AwaitHeld(kBudget)) << "rank 1's message never filled the budget";
  for (int i = 0; i < kSmall; ++i) {
    Result<Message> m = comms[0]->Recv(2, 8, DeadlineIn(120s));
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->payload, Payload(i, 64 << 10)) << "rank 2's message " << i;
  }
  small.join();
  const uint64_t rss_waiting = ResidentBytes();
  const uint64_t held_waiting = watch.Stop();
  EXPECT_LE(held_waiting, kBudget + Mailbox::kChunkBytes);
  Result<Message> got = comms[0]->Recv(1, 7, DeadlineIn(120s));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->payload == first);
  HeldWatch second_watch(*comms[0], 1);  // the second message's start, then its receive
  ASSERT_TRUE(second_watch.AwaitHeld(kBudget));
  std::vector<std::byte> into(kLarge);
  ASSERT_TRUE(comms[0]->RecvInto(1, 7, into, DeadlineIn(120s)).ok());
  EXPECT_TRUE(into == second);
  large.join();
  EXPECT_LE(second_watch.Stop(), kBudget + Mailbox::kChunkBytes);
  std::cout << "[budget] 64 MiB messages under a 1 MiB budget: at most " << held_waiting
            << " bytes held before a receive asked; resident memory grew by "
            << (static_cast<int64_t>(rss_waiting) - static_cast<int64_t>(rss_before)) / 1024
            << " KiB meanwhile\n";
}

// A large RecvInto reads its connection itself; it used to read past the budget to reach its own
// message, staging every message ahead of it. Now it stops at the budget like the io thread and
// waits as any receive: its message, behind 64 MiB nobody receives yet, is not reached before
// its deadline, nothing passes the budget, and then every message arrives whole and in order.
TEST(ReceiveBudget, AReceiveReadingTheConnectionItselfStopsAtTheBudget) {
  TcpOptions options = testing::TestOptions();
  options.receive_budget_bytes = kBudget;
  auto comms = Form(2, options);
  ASSERT_EQ(comms.size(), 2u);
  constexpr int kAhead = 64;  // of 1 MiB: beyond the kernel's buffers (tcp_rmem's 32 MiB here)
  constexpr size_t kMiB = size_t{1} << 20;
  HeldWatch watch(*comms[0], 1);
  std::thread sender([&] {
    for (int i = 0; i < kAhead; ++i)
      ASSERT_TRUE(comms[1]->Send(0, 3, Payload(i, kMiB), DeadlineIn(120s)).ok());
    ASSERT_TRUE(comms[1]->Send(0, 4, Payload(99, kMiB), DeadlineIn(120s)).ok());
  });
  ASSERT_TRUE(watch.AwaitHeld(kBudget));
  std::vector<std::byte> behind(kMiB);
  const Status early = comms[0]->RecvInto(1, 4, behind, DeadlineIn(1s));
  EXPECT_EQ(early.code(), StatusCode::kDeadlineExceeded) << early;
  EXPECT_LE(watch.most(), kBudget + Mailbox::kChunkBytes) << "read past the budget";
  for (int i = 0; i < kAhead; ++i) {
    std::vector<std::byte> got(kMiB);
    ASSERT_TRUE(comms[0]->RecvInto(1, 3, got, DeadlineIn(120s)).ok()) << "message " << i;
    ASSERT_EQ(got, Payload(i, kMiB)) << "message " << i;
  }
  ASSERT_TRUE(comms[0]->RecvInto(1, 4, behind, DeadlineIn(120s)).ok());
  EXPECT_EQ(behind, Payload(99, kMiB));
  sender.join();
  EXPECT_LE(watch.Stop(), kBudget + Mailbox::kChunkBytes);
}

// A rank with the secret whose frame claims 2^40 bytes: refused at its header (no byte of it
// staged), its peer failed naming it and the limit; with failures isolated (reel tune, a
// parameter server) the other ranks go on exchanging.
TEST(ReceiveBudget, AFrameClaimingATerabyteFailsItsSenderAndNoOneElse) {
  TcpOptions options = testing::TestOptions();
  options.receive_budget_bytes = kBudget;
  testing::CapturedStderr captured;
  auto comms = Form(3, options, /*isolate_failures=*/true);
  ASSERT_EQ(comms.size(), 3u);
  std::vector<std::byte> frame;
  const auto header = EncodeFrameHeader({FrameType::kData, 1, 5, uint64_t{1} << 40});
  frame.assign(header.begin(), header.end());
  frame.resize(frame.size() + (1 << 20), std::byte{0x5a});  // and a start of its "payload"
  auto& hostile = static_cast<TcpCommunicator&>(*comms[1]);
  // The receiver fails the connection at once; the rest of the write may find it closed.
  (void)hostile.WriteRawForTesting(0, frame, DeadlineIn(10s));
  Result<Message> m = comms[0]->Recv(1, 5, DeadlineIn(60s));
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable) << m.status();
  EXPECT_THAT(m.status().message(),
              HasSubstr("rank 1 is unavailable: it sent bytes that are not the protocol: frame "
                        "header: payload of 1099511627776 bytes exceeds the limit of "
                        "2147483647"));
  EXPECT_EQ(static_cast<TcpCommunicator&>(*comms[0]).HeldBytes(1), 0u);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(comms[2]->Send(0, 6, Payload(i), DeadlineIn(60s)).ok());
    ASSERT_TRUE(comms[0]->Send(2, 6, Payload(i + 10), DeadlineIn(60s)).ok());
    Result<Message> at0 = comms[0]->Recv(2, 6, DeadlineIn(60s));
    Result<Message> at2 = comms[2]->Recv(0, 6, DeadlineIn(60s));
    ASSERT_TRUE(at0.ok()) << at0.status();
    ASSERT_TRUE(at2.ok()) << at2.status();
    EXPECT_EQ(at0->payload, Payload(i));
    EXPECT_EQ(at2->payload, Payload(i + 10));
  }
  comms.clear();
  EXPECT_THAT(captured.Restore(),
              HasSubstr("reel tcp rank 0: rank 1 is unavailable: it sent bytes that are not the "
                        "protocol"));
}
// receive_budget_bytes=0 would stop reading every peer for good; a figure below a page is a unit
// mistaken (MiB?), one above 1 TiB bounds nothing. Refused when the options are read, naming it.
TEST(ReceiveBudgetOption, IsRefusedOutOfRangeNamingTheOption) {
  for (const char* bad : {"0", "-1", "256", "4095", "1099511627777"}) {
    Result<Options> parsed = ParseOptions(TcpOptionSchema(), {{"receive_budget_bytes", bad}});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    Result<TcpOptions> o = TcpOptionsFrom(*parsed);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(o.status().message(),
                HasSubstr("tcp option 'receive_budget_bytes': " + std::string(bad) +
                          " is outside [4096, 1099511627776]"));
  }
  for (const char* good : {"4096", "1048576", "1099511627776"}) {
    Result<Options> parsed = ParseOptions(TcpOptionSchema(), {{"receive_budget_bytes", good}});
    ASSERT_TRUE(parsed.ok());
    Result<TcpOptions> o = TcpOptionsFrom(*parsed);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->receive_budget_bytes, std::stoull(good));
  }
  Result<Options> unset = ParseOptions(TcpOptionSchema(), {});
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(TcpOptionsFrom(*unset)->receive_budget_bytes, TcpOptions::kDefaultReceiveBudgetBytes);
}

}  // namespace
}  // namespace reel::tcp
