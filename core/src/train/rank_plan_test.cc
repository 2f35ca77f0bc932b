// Which ranks a process runs and over which transport: every way a launcher or a config can say
// it, and every bad value refused naming the variable or field.
#include "reel/core/rank_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "comm/fake_environment.h"

namespace reel::core {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

config::RunConfig Config(int64_t local_ranks, const std::string& transport = "") {
  config::RunConfig c;
  c.mutable_trainer()->set_local_ranks(local_ranks);
  if (!transport.empty()) c.mutable_transport()->set_name(transport);
  return c;
}

std::vector<std::pair<int, int>> Ranks(const RankPlan& plan) {
  std::vector<std::pair<int, int>> out;
  for (const auto& r : plan.ranks) out.push_back({r.rank, r.world_size});
  return out;
}

TEST(RankPlan, AloneWithoutEnvironmentUsesTheDefaultTransportAndLetsItDiscover) {
  auto plan = PlanRanks(Config(0), "inproc", testing::FakeEnvironment({}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->transport, "inproc");
  EXPECT_EQ(plan->why, "");
  EXPECT_EQ(Ranks(*plan), (std::vector<std::pair<int, int>>{{kDiscover, kDiscover}}));
  EXPECT_EQ(plan->timeouts.connect, kDefaultConnectTimeout);
  EXPECT_EQ(plan->timeouts.each, kDefaultTimeout);
}

TEST(RankPlan, LocalRanksFormAWorldOfThreads) {
  auto plan = PlanRanks(Config(3), "inproc", testing::FakeEnvironment({}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Ranks(*plan), (std::vector<std::pair<int, int>>{{0, 3}, {1, 3}, {2, 3}}));
}

TEST(RankPlan, ProcessesTimesLocalRanks) {
  // Process 1 of 2 with 3 local ranks runs ranks 3, 4, 5 of 6, over the configured transport.
  auto plan = PlanRanks(
      Config(3, "tcp"), "inproc",
      testing::FakeEnvironment(
          {{"REEL_RANK", "1"}, {"REEL_WORLD_SIZE", "2"}, {"REEL_COORDINATOR", "10.1.0.1:29500"}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->transport, "tcp");
  EXPECT_EQ(plan->why, "");
  EXPECT_EQ(Ranks(*plan), (std::vector<std::pair<int, int>>{{3, 6}, {4, 6}, {5, 6}}));
  for (const auto& r : plan->ranks) EXPECT_EQ(r.coordinator, "10.1.0.1:29500");
}

TEST(RankPlan, UnderMpirunWithoutATransportUsesMpiAndSaysWhy) {
  auto plan =
      PlanRanks(Config(0), "inproc", testing::FakeEnvironment({{"OMPI_COMM_WORLD_RANK", "1"}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->transport, "mpi");
  EXPECT_THAT(plan->why, HasSubstr("OMPI_COMM_WORLD_RANK is set"));
  EXPECT_EQ(Ranks(*plan), (std::vector<std::pair<int, int>>{{kDiscover, kDiscover}}));
  // A transport the config names wins.
  auto named =
      PlanRanks(Config(0, "tcp"), "inproc", testing::FakeEnvironment({{"PMIX_RANK", "0"}}));
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->transport, "tcp");
  EXPECT_EQ(named->why, "");
}

TEST(RankPlan, LauncherTransportThenTcpForAWorldOfProcesses) {
  auto launched =
      PlanRanks(Config(0), "inproc",
                testing::FakeEnvironment(
                    {{"REEL_RANK", "0"}, {"REEL_WORLD_SIZE", "2"}, {"REEL_TRANSPORT", "x"}}));
  ASSERT_TRUE(launched.ok()) << launched.status();
  EXPECT_EQ(launched->transport, "x");
  EXPECT_THAT(launched->why, HasSubstr("REEL_TRANSPORT=x"));
  auto plain = PlanRanks(Config(0), "inproc",
                         testing::FakeEnvironment({{"REEL_RANK", "0"}, {"REEL_WORLD_SIZE", "2"}}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->transport, "tcp");
  EXPECT_THAT(plain->why, HasSubstr("REEL_WORLD_SIZE=2"));
  EXPECT_EQ(Ranks(*plain), (std::vector<std::pair<int, int>>{{0, 2}}));
}

void ExpectInvalid(const config::RunConfig& c, std::map<std::string, std::string> env,
                   const std::string& text) {
  auto plan = PlanRanks(c, "inproc", testing::FakeEnvironment(std::move(env)));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument) << plan.status();
  EXPECT_THAT(plan.status().message(), HasSubstr(text));
}

TEST(RankPlan, BadValuesAreRefusedNamingThem) {
  ExpectInvalid(Config(0), {{"REEL_RANK", "abc"}, {"REEL_WORLD_SIZE", "2"}}, "REEL_RANK=\"abc\"");
  ExpectInvalid(Config(-2), {}, "trainer.local_ranks=-2");
  ExpectInvalid(Config(2), {{"OMPI_COMM_WORLD_RANK", "0"}}, "trainer.local_ranks=2 under an MPI");
  config::RunConfig c = Config(0);
  c.mutable_transport()->set_timeout_seconds(0);
  ExpectInvalid(c, {}, "transport.timeout_seconds=0");
  c = Config(0);
  c.mutable_transport()->set_connect_timeout_seconds(-1);
  ExpectInvalid(c, {}, "transport.connect_timeout_seconds=-1");
}

TEST(RankPlan, TimeoutsFromTheTransportSection) {
  config::RunConfig c = Config(0);
  c.mutable_transport()->set_connect_timeout_seconds(2.5);
  c.mutable_transport()->set_timeout_seconds(0.01);
  auto t = TimeoutsFrom(c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->connect, 2500ms);
  EXPECT_EQ(t->each, 10ms);
  // A section with timeouts and no name leaves the choice of transport to the launcher.
  auto plan = PlanRanks(c, "inproc",
                        testing::FakeEnvironment({{"REEL_RANK", "1"},
                                                  {"REEL_WORLD_SIZE", "2"},
                                                  {"REEL_TRANSPORT", "tcp"},
                                                  {"REEL_COORDINATOR", "127.0.0.1:29500"}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->transport, "tcp");
  EXPECT_EQ(plan->timeouts.connect, 2500ms);
}

}  // namespace
}  // namespace reel::core
