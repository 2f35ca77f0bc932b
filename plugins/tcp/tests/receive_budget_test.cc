// The receive budget over real connections: a sender far ahead of its receiver is held back by
// TCP's flow control once the receiver's queue holds the budget, and every message arrives.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "tcp_communicator.h"
#include "tcp_test_util.h"

namespace reel::tcp {
namespace {

constexpr size_t kMessage = size_t{256} << 10;
constexpr int kMessages = 200;  // 50 MiB, far beyond the budget and the kernel's buffers

std::vector<std::byte> Payload(int i) {
  std::vector<std::byte> p(kMessage);
  for (size_t j = 0; j < p.size(); j += 4096) p[j] = std::byte(i + j / 4096);
  return p;
}

TEST(ReceiveBudget, AFastSenderCannotGrowTheReceiversQueuePastTheBudget) {
  TcpOptions options = testing::TestOptions();
  options.receive_budget_bytes = size_t{1} << 20;
  // Bare tcp communicators (testing::Group adds the core's collectives around them).
  auto transport = MakeTcpTransport(options);
  const std::string coordinator = testing::FreeCoordinator();
  std::vector<Result<std::unique_ptr<Communicator>>> joined;
  for (int r = 0; r < 2; ++r) joined.emplace_back(InternalError("not run"));
  std::vector<std::thread> joining;
  for (int r = 0; r < 2; ++r)
    joining.emplace_back([&, r] {
      joined[r] = transport->Connect({r, 2, coordinator}, DeadlineIn(std::chrono::seconds(60)));
    });
  for (auto& t : joining) t.join();
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& j : joined) {
    ASSERT_TRUE(j.ok()) << j.status();
    comms.push_back(std::move(*j));
  }
  auto& receiver = static_cast<TcpCommunicator&>(*comms[0]);
  std::atomic<uint64_t> most{0};
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done.load()) {
      const uint64_t q = receiver.QueuedBytes(1);
      if (q > most.load()) most.store(q);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::thread sender([&] {
    for (int i = 0; i < kMessages; ++i)
      ASSERT_TRUE(comms[1]->Send(0, 3, Payload(i), DeadlineIn(std::chrono::seconds(120))).ok());
  });
  // The receiver looks away while the sender could have sent everything many times over.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const uint64_t while_away = most.load();
  for (int i = 0; i < kMessages; ++i) {
    Result<Message> m = comms[0]->Recv(1, 3, DeadlineIn(std::chrono::seconds(120)));
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->payload, Payload(i)) << "message " << i;
  }
  sender.join();
  done.store(true);
  watch.join();
  // Read whole, the message that crosses the budget is the most it can be exceeded by.
  EXPECT_LE(most.load(), options.receive_budget_bytes + kMessage)
      << "most queued while the receiver looked away: " << while_away;
  EXPECT_GT(while_away, 0u) << "the sender sent nothing in a second";
}

}  // namespace
}  // namespace reel::tcp
