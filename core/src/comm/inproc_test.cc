// The inproc transport: the conformance suite (ranks as threads, and this process as a world of
// one), plus what is specific to it (the direct API, rendezvous errors, registration).
#include "reel/core/inproc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "reel/core/collectives.h"
#include "reel/core/registry.h"
#include "reel/testing/transport_conformance.h"

namespace reel::core {
namespace {

using conformance::Communicators;
using conformance::ConnectOnThreads;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Every call forms a fresh group under a new name, as separate test runs would.
Result<conformance::Group> FreshGroup() {
  static std::atomic<int> counter{0};
  return conformance::Group{MakeInprocTransport("conformance-" + std::to_string(counter++)), ""};
}

REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(Inproc, conformance::RanksAsThreads("inproc", FreshGroup));
// One rank per process: started without REEL_RANK, inproc discovers a world of this one rank,
// so the cases that need two or more ranks are skipped and the rest run through the per-process
// path a plugin's launched tests take.
REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(
    InprocProcess, conformance::RankPerProcess("inproc_process", [] {
      return Result<conformance::Group>(conformance::Group{MakeInprocTransport("process"), ""});
    }));

// The receive budget: a sender far ahead of its receiver waits instead of growing the receiver's
// queue; a send over the budget fails at its deadline without queueing anything, and every
// message sent arrives intact and in order.
TEST(InprocTransport, ASenderOverTheReceiveBudgetWaitsAndNothingIsLost) {
  constexpr size_t kMessage = 512;
  auto comms = CreateInprocGroup(2, /*receive_budget_bytes=*/2 * kMessage);
  ASSERT_TRUE(comms.ok()) << comms.status();
  Communicator& to = *(*comms)[0];
  Communicator& from = *(*comms)[1];
  auto payload = [](int i) { return std::vector<std::byte>(kMessage, std::byte(i)); };
  ASSERT_TRUE(from.Send(0, 7, payload(0), DeadlineIn(std::chrono::seconds(5))).ok());
  ASSERT_TRUE(from.Send(0, 7, payload(1), DeadlineIn(std::chrono::seconds(5))).ok());
  Status over = from.Send(0, 7, payload(2), DeadlineIn(std::chrono::milliseconds(50)));
  EXPECT_EQ(over.code(), StatusCode::kDeadlineExceeded) << over;
  EXPECT_THAT(over.message(), ::testing::HasSubstr("rank 0 is not receiving (1024 bytes"));
  // A sender that waits goes on as soon as the receiver takes a message.
  std::thread sender([&] {
    for (int i = 2; i < 40; ++i)
      ASSERT_TRUE(from.Send(0, 7, payload(i), DeadlineIn(std::chrono::seconds(30))).ok());
  });
  for (int i = 0; i < 40; ++i) {
    Result<Message> m = to.Recv(1, 7, DeadlineIn(std::chrono::seconds(30)));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->payload, payload(i)) << "message " << i;
  }
  sender.join();
  EXPECT_EQ(to.Recv(1, 7, DeadlineIn(std::chrono::milliseconds(10))).status().code(),
            StatusCode::kDeadlineExceeded)
      << "the refused send queued nothing";
}

TEST(InprocTransport, ASenderWaitingForRoomAtARankThatLeavesIsUnavailable) {
  auto comms = CreateInprocGroup(2, /*receive_budget_bytes=*/1);
  ASSERT_TRUE(comms.ok()) << comms.status();
  const std::vector<std::byte> one(8);
  ASSERT_TRUE((*comms)[1]->Send(0, 1, one, DeadlineIn(std::chrono::seconds(5))).ok());
  std::thread leaver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*comms)[0].reset();
  });
  Status s = (*comms)[1]->Send(0, 1, one, DeadlineIn(std::chrono::seconds(60)));
  leaver.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("rank 0 has left the group"));
}

TEST(InprocTransport, GroupOfZeroRanksIsRefused) {
  EXPECT_EQ(CreateInprocGroup(0).status().code(), StatusCode::kInvalidArgument);
}

TEST(InprocTransport, SendToARankThatLeftIsUnavailable) {
  auto comms = CreateInprocGroup(3);
  ASSERT_TRUE(comms.ok());
  (*comms)[1].reset();
  Status s = (*comms)[0]->Send(1, 0, {}, NoDeadline());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank 1 has left"));
  // Rank 2 is still there, so a receive from any source keeps waiting (until its deadline)...
  EXPECT_EQ((*comms)[0]->Recv(kAnySource, 0, DeadlineIn(10ms)).status().code(),
            StatusCode::kDeadlineExceeded);
  // ...and once every other rank has left it reports that instead of waiting.
  (*comms)[2].reset();
  Status any = (*comms)[0]->Recv(kAnySource, 0, NoDeadline()).status();
  EXPECT_EQ(any.code(), StatusCode::kUnavailable) << any;
  EXPECT_THAT(any.message(), HasSubstr("every other rank has left"));
}

TEST(InprocTransport, RankMaySendToItself) {
  auto comms = CreateInprocGroup(1);
  ASSERT_TRUE(comms.ok());
  std::vector<std::byte> data(5, std::byte{3});
  ASSERT_TRUE((*comms)[0]->Send(0, 1, data, NoDeadline()).ok());
  auto m = (*comms)[0]->Recv(kAnySource, 1, NoDeadline());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->payload, data);
}

TEST(InprocTransport, DiscoveringFormsAGroupOfOne) {
  auto t = MakeInprocTransport("discover");
  auto c = t->Connect({kDiscover, kDiscover, ""}, DeadlineIn(1s));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->rank(), 0);
  EXPECT_EQ((*c)->size(), 1);
}

TEST(InprocTransport, ConnectRejectsBadRanksAndSizes) {
  auto t = MakeInprocTransport("connect-errors");
  EXPECT_EQ(t->Connect({kDiscover, 2, ""}, DeadlineIn(1s)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Connect({2, 2, ""}, DeadlineIn(1s)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Connect({-1, 2, ""}, DeadlineIn(1s)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Connect({0, 0, ""}, DeadlineIn(1s)).status().code(), StatusCode::kInvalidArgument);
}

// Two threads race to be rank 0 of `world`, asking for sizes `size_a` and `size_b`: whichever
// comes second must be refused at once with `code`; the group the first one started is then
// completed by the main thread, so nothing is left waiting. Either order is checked the same way.
void RaceForRankZero(const std::string& world, int size_a, int size_b, StatusCode code,
                     const std::string& text) {
  auto t = MakeInprocTransport(world);
  auto a = std::async(std::launch::async, [&] {
    return t->Connect({0, size_a, ""}, DeadlineIn(60s));
  });
  auto b = std::async(std::launch::async, [&] {
    return t->Connect({0, size_b, ""}, DeadlineIn(60s));
  });
  bool a_first_done = false;
  while (true) {  // the refused one returns at once; the other waits for its group
    if (a.wait_for(1ms) == std::future_status::ready) {
      a_first_done = true;
      break;
    }
    if (b.wait_for(1ms) == std::future_status::ready) break;
  }
  auto refused = a_first_done ? a.get() : b.get();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), code) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr(text));
  const int size = a_first_done ? size_b : size_a;
  std::vector<std::future<Result<std::unique_ptr<Communicator>>>> rest;
  for (int r = 1; r < size; ++r)
    rest.push_back(std::async(std::launch::async, [&, r] {
      return t->Connect({r, size, ""}, DeadlineIn(60s));
    }));
  auto winner = a_first_done ? b.get() : a.get();
  ASSERT_TRUE(winner.ok()) << winner.status();
  EXPECT_EQ((*winner)->size(), size);
  for (auto& f : rest) EXPECT_TRUE(f.get().ok());
}

TEST(InprocTransport, ConnectRefusesAWorldSizeThatDiffersFromTheGroup) {
  RaceForRankZero("size-mismatch", 2, 3, StatusCode::kInvalidArgument,
                  "the group was started with");
}

TEST(InprocTransport, ConnectRefusesARankThatAlreadyJoined) {
  RaceForRankZero("duplicate-rank", 2, 2, StatusCode::kAlreadyExists, "rank 0 has already joined");
}

TEST(InprocTransport, ConnectTimesOutNamingTheMissingRanks) {
  auto t = MakeInprocTransport("missing-ranks");
  auto c = t->Connect({1, 4, ""}, DeadlineIn(20ms));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(c.status().message(), HasSubstr("waiting for ranks 0, 2, 3"));
  // The slot was given back: the group can still form under the same name.
  Communicators comms;
  auto formed = ConnectOnThreads(*t, 4, "", DeadlineIn(60s));
  ASSERT_TRUE(formed.ok()) << formed.status();
}

TEST(InprocTransport, NameIsReusableAfterTheGroupFormed) {
  auto t = MakeInprocTransport("reused");
  for (int run = 0; run < 3; ++run) {
    auto comms = ConnectOnThreads(*t, 2, "", DeadlineIn(60s));
    ASSERT_TRUE(comms.ok()) << comms.status();
    // Each group is a fresh one: its sum is over this run's two ranks only.
    std::vector<float> reduced(2, -1.0f);
    auto st = conformance::RunOnRanks(*comms, [&](Communicator& c) {
      std::vector<float> v = {static_cast<float>(c.rank() + run)};
      Status s = c.AllReduce(v, ReduceOp::kSum, DeadlineIn(60s));
      reduced[c.rank()] = v[0];
      return s;
    });
    for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(reduced, std::vector<float>(2, static_cast<float>(0 + run + 1 + run))) << run;
  }
}

TEST(InprocTransport, RegisteredAsBuiltinWithWorldOption) {
  Registry registry;
  ASSERT_TRUE(registry.RegisterBuiltins().ok());
  auto bad = registry.CreateTransport("inproc", {{"wrld", "x"}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("wrld"));
  auto t = registry.CreateTransport("inproc", {{"world", "registered"}});
  ASSERT_TRUE(t.ok()) << t.status();
  auto comms = ConnectOnThreads(**t, 3, "", DeadlineIn(60s));
  ASSERT_TRUE(comms.ok()) << comms.status();
  EXPECT_EQ((*comms)[2]->rank(), 2);
}

}  // namespace
}  // namespace reel::core
