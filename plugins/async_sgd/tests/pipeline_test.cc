// The pipelined push+pull (wire.h, kPushPull) when the worker dies or stalls half way through its
// push: the server applies only a push that arrived whole, holds no lock while it waits for one,
// and stops when told to.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "ranks.h"
#include "shard_server.h"
#include "wire.h"

namespace reel::async_sgd {
namespace {

class CutOff : public ::testing::TestWithParam<std::string> {};

// Rank 0 serves, rank 1 trains 3 steps, rank 2 sends the header and the first two of the four
// chunks of a push (6 + 6 of 22 floats, far from anything a gradient would hold) and then its
// rank goes away, as a dying process's would. The server's shard, rule state included, is then
// what the plain rule makes of rank 1's three gradients alone, bit for bit; rank 2 counts no
// push and is dropped.
TEST_P(CutOff, APushCutOffHalfWayIsNeverApplied) {
  const std::string rule = GetParam();
  constexpr int kWorld = 3, kSteps = 3;
  constexpr float kLr = 0.05f;
  const std::map<std::string, std::string> options = {
      {"rule", rule}, {"pipeline_chunk", "6"}, {"timeout_ms", "60000"}};
  std::vector<ParamArena> arenas(kWorld);
  for (auto& a : arenas) Declare(a);
  const size_t total = static_cast<size_t>(arenas[0].total_size());
  for (size_t i = 0; i < total; ++i) arenas[0].values()[i] = 0.01f * static_cast<float>(i);
  std::vector<float> want(arenas[0].values().begin(), arenas[0].values().end());
  std::vector<float> held;
  std::vector<ShardServer::Tally> tallies;
  auto results = OnRankThreads(kWorld, [&](int r, auto& comm) -> Result<core::TrainResult> {
    ParamArena& arena = arenas[static_cast<size_t>(r)];
    {
      REEL_ASSIGN_OR_RETURN(auto opt, Make(options, r, kWorld));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, *comm));
      if (r == 0) {
        REEL_RETURN_IF_ERROR(opt->Serve());
        REEL_RETURN_IF_ERROR(opt->Finish());
        held = opt->server()->values();
        tallies = opt->server()->tallies();
      } else if (r == 1) {
        for (int step = 0; step < kSteps; ++step) {
          for (size_t i = 0; i < total; ++i) arena.grads()[i] = SmoothGrad(step, i);
          REEL_RETURN_IF_ERROR(opt->Step(kLr));
        }
        REEL_RETURN_IF_ERROR(opt->Finish());
      } else {
        Header h = MakeHeader(Kind::kPushPull, 0, 1, 0, static_cast<int64_t>(total), kLr);
        h.aux = 6;
        REEL_RETURN_IF_ERROR(SendHeader(*comm, 0, kRequestTag, h, NoDeadline()));
        const std::vector<float> chunk(6, 1000.0f);
        for (int c = 0; c < 2; ++c)
          REEL_RETURN_IF_ERROR(
              comm->Send(0, kPayloadTag, std::as_bytes(std::span(chunk)), NoDeadline()));
      }
    }
    if (r == 2) comm.reset();
    return core::TrainResult{};
  });
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
  UpdateRuleConfig config;
  config.rule = rule;
  auto ref = MakeUpdateRule(config);
  ASSERT_TRUE(ref.ok());
  std::vector<float> g(total);
  for (int step = 0; step < kSteps; ++step) {
    for (size_t i = 0; i < total; ++i) g[i] = SmoothGrad(step, i);
    (*ref)->Apply(want, g, kLr);
  }
  EXPECT_EQ(held, want);
  ASSERT_EQ(tallies.size(), 2u);
  EXPECT_EQ(tallies[0].applied, kSteps);
  EXPECT_TRUE(tallies[0].done);
  EXPECT_EQ(tallies[1].applied, 0);
  EXPECT_THAT(tallies[1].lost, ::testing::HasSubstr("UNAVAILABLE"));
}

INSTANTIATE_TEST_SUITE_P(Rules, CutOff, ::testing::Values("sgd", "momentum", "adam"));

// A one-shot signal between rank threads, with a bound that turns a hang into a failure.
class Signal {
 public:
  void Raise() {
    std::lock_guard<std::mutex> lock(mu_);
    raised_ = true;
    cv_.notify_all();
  }
  bool Await(std::chrono::seconds bound) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, bound, [&] { return raised_; });
  }
  bool raised() {
    std::lock_guard<std::mutex> lock(mu_);
    return raised_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool raised_ = false;
};

// Rank 2 stalls half way through a pipelined push (as a SIGSTOPped process would): rank 1 trains
// all its steps, each a push+pull with the same server, while rank 2 is still stalled; then rank
// 2 sends the rest and its push is applied, after rank 1's. (Rank 2 gives up waiting after a
// minute, so that a server that held its lock fails the test instead of hanging it.)
TEST(Stall, AWorkerStalledMidPushHoldsUpNoOtherWorker) {
  constexpr int kWorld = 3, kSteps = 4;
  constexpr float kLr = 0.05f;
  const std::map<std::string, std::string> options = {
      {"rule", "adam"}, {"pipeline_chunk", "6"}, {"timeout_ms", "120000"}};
  std::vector<ParamArena> arenas(kWorld);
  for (auto& a : arenas) Declare(a);
  const size_t total = static_cast<size_t>(arenas[0].total_size());
  for (size_t i = 0; i < total; ++i) arenas[0].values()[i] = 0.01f * static_cast<float>(i);
  std::vector<float> want(arenas[0].values().begin(), arenas[0].values().end());
  std::vector<float> held, fresh(total);
  std::vector<ShardServer::Tally> tallies;
  Signal stalled, trained;
  bool trained_while_stalled = false;
  const std::vector<float> push(total, 1000.0f);
  auto results = OnRankThreads(kWorld, [&](int r, auto& comm) -> Result<core::TrainResult> {
    ParamArena& arena = arenas[static_cast<size_t>(r)];
    REEL_ASSIGN_OR_RETURN(auto opt, Make(options, r, kWorld));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, *comm));
    if (r == 0) {
      REEL_RETURN_IF_ERROR(opt->Serve());
      REEL_RETURN_IF_ERROR(opt->Finish());
      held = opt->server()->values();
      tallies = opt->server()->tallies();
    } else if (r == 1) {
      if (!stalled.Await(std::chrono::seconds(60))) return InternalError("rank 2 never stalled");
      for (int step = 0; step < kSteps; ++step) {
        for (size_t i = 0; i < total; ++i) arena.grads()[i] = SmoothGrad(step, i);
        REEL_RETURN_IF_ERROR(opt->Step(kLr));
      }
      trained.Raise();
      REEL_RETURN_IF_ERROR(opt->Finish());
    } else {
      // By hand: a header and 2 of the 4 chunks of a push+pull, then a stall.
      Header h = MakeHeader(Kind::kPushPull, 0, 1, 0, static_cast<int64_t>(total), kLr);
      h.aux = 6;
      REEL_RETURN_IF_ERROR(SendHeader(*comm, 0, kRequestTag, h, NoDeadline()));
      auto chunk = [&](size_t at) {
        const size_t len = std::min<size_t>(6, total - at);
        return comm->Send(0, kPayloadTag, std::as_bytes(std::span(push).subspan(at, len)),
                          NoDeadline());
      };
      REEL_RETURN_IF_ERROR(chunk(0));
      REEL_RETURN_IF_ERROR(chunk(6));
      stalled.Raise();
      trained_while_stalled = trained.Await(std::chrono::seconds(60));
      for (size_t at = 12; at < total; at += 6) REEL_RETURN_IF_ERROR(chunk(at));
      for (size_t at = 0; at < total; at += 6) {
        const size_t len = std::min<size_t>(6, total - at);
        REEL_RETURN_IF_ERROR(comm->RecvInto(
            0, kReplyPayloadTag, std::as_writable_bytes(std::span(fresh).subspan(at, len)),
            NoDeadline()));
      }
      REEL_ASSIGN_OR_RETURN(Header reply, RecvHeader(*comm, 0, kReplyTag, NoDeadline()));
      if (reply.kind != Kind::kPushPulled || reply.version != kSteps + 1)
        return InternalError(std::string("rank 2's push+pull was answered with ") +
                             KindName(reply.kind) + " at version " + std::to_string(reply.version));
      REEL_RETURN_IF_ERROR(
          SendHeader(*comm, 0, kRequestTag, MakeHeader(Kind::kDone, 0, 1), NoDeadline()));
    }
    return core::TrainResult{};
  });
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
  EXPECT_TRUE(trained_while_stalled) << "rank 1 could not train while rank 2 was stalled";
  // Rank 1's four gradients, then rank 2's push, with the plain rule.
  UpdateRuleConfig config;
  config.rule = "adam";
  auto ref = MakeUpdateRule(config);
  ASSERT_TRUE(ref.ok());
  std::vector<float> g(total);
  for (int step = 0; step < kSteps; ++step) {
    for (size_t i = 0; i < total; ++i) g[i] = SmoothGrad(step, i);
    (*ref)->Apply(want, g, kLr);
  }
  (*ref)->Apply(want, push, kLr);
  EXPECT_EQ(held, want);
  EXPECT_EQ(fresh, want) << "rank 2 got the shard its push made";
  ASSERT_EQ(tallies.size(), 2u);
  EXPECT_EQ(tallies[0].applied, kSteps);
  EXPECT_EQ(tallies[1].applied, 1);
}

// A server whose worker stalls mid-push returns from Run() once stopped (Cancelled), instead of
// waiting out the worker's timeout (two minutes here; the test gives up after one).
TEST(Stall, AServerWaitingForAStalledPushHonoursItsStopFlag) {
  constexpr int kWorld = 2;
  auto options = ParseOptions(AsyncOptions(), {{"rule", "sgd"}, {"timeout_ms", "120000"}});
  ASSERT_TRUE(options.ok()) << options.status();
  auto config = ParseAsyncConfig(*options, OptimizerContext{0, kWorld});
  ASSERT_TRUE(config.ok()) << config.status();
  const std::vector<float> initial(12, 0.0f);
  std::unique_ptr<ShardServer> server;
  Signal stalled, served;
  Status run = InternalError("not run");
  auto results = OnRankThreads(kWorld, [&](int r, auto& comm) -> Result<core::TrainResult> {
    if (r == 0) {
      REEL_ASSIGN_OR_RETURN(
          server, ShardServer::Create(*config, RolesFor(*config, kWorld), *comm, 0, initial));
      std::thread stopper([&] {
        if (stalled.Await(std::chrono::seconds(60))) server->Stop();
      });
      run = server->Run();
      served.Raise();
      stopper.join();
      return core::TrainResult{};
    }
    Header h = MakeHeader(Kind::kPushPull, 0, 1, 0, 12, 0.1f);
    h.aux = 6;
    REEL_RETURN_IF_ERROR(SendHeader(*comm, 0, kRequestTag, h, NoDeadline()));
    const std::vector<float> chunk(6, 1.0f);
    REEL_RETURN_IF_ERROR(comm->Send(0, kPayloadTag, std::as_bytes(std::span(chunk)), NoDeadline()));
    stalled.Raise();
    served.Await(std::chrono::seconds(60));  // stalled, its link open, until the server is done
    return core::TrainResult{};
  });
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
  EXPECT_TRUE(served.raised());
  EXPECT_EQ(run.code(), StatusCode::kCancelled) << run;
  EXPECT_THAT(run.message(), ::testing::HasSubstr("stopped while receiving a push from rank 1"));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->values(), initial) << "nothing of the half push was applied";
}

}  // namespace
}  // namespace reel::async_sgd
