// The pipelined push+pull (wire.h, kPushPull) when the worker dies half way through its push: the
// server takes back what it applied of it, so nothing of a push that never arrived whole remains.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ranks.h"
#include "wire.h"

namespace reel::async_sgd {
namespace {

class CutOff : public ::testing::TestWithParam<std::string> {};

// Rank 0 serves, rank 1 trains 3 steps, rank 2 sends the header and the first two of the four
// chunks of a push (6 + 6 of 22 floats, far from anything a gradient would hold) and then its
// rank goes away, as a dying process's would. The server's shard, rule state included, is then
// what the plain rule makes of rank 1's three gradients alone, bit for bit; rank 2 counts no
// push and is dropped.
TEST_P(CutOff, APushCutOffHalfWayIsTakenBack) {
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

}  // namespace
}  // namespace reel::async_sgd
