// Rank, world size and coordinator from the environment: strict parsing, errors naming the
// variable, discovery when nothing is set, and MPI launchers recognised.
#include "reel/core/rank_environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "comm/fake_environment.h"

namespace reel::core {
namespace {

using ::testing::HasSubstr;

TEST(RankEnvironment, NothingSetLeavesRankAndSizeToTheTransport) {
  auto ctx = TransportContextFromEnvironment(testing::FakeEnvironment({}));
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ(ctx->rank, kDiscover);
  EXPECT_EQ(ctx->world_size, kDiscover);
  EXPECT_EQ(ctx->coordinator, "");
}

TEST(RankEnvironment, ReadsRankWorldAndCoordinator) {
  auto ctx = TransportContextFromEnvironment(testing::FakeEnvironment(
      {{"REEL_RANK", "2"}, {"REEL_WORLD_SIZE", "3"}, {"REEL_COORDINATOR", "10.0.0.1:29500"}}));
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ(ctx->rank, 2);
  EXPECT_EQ(ctx->world_size, 3);
  EXPECT_EQ(ctx->coordinator, "10.0.0.1:29500");
}

void ExpectInvalid(std::map<std::string, std::string> vars, const std::string& text) {
  auto ctx = TransportContextFromEnvironment(testing::FakeEnvironment(vars));
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument) << ctx.status();
  EXPECT_THAT(ctx.status().message(), HasSubstr(text));
}

TEST(RankEnvironment, ValuesThatAreNotWholeNumbersNameTheVariable) {
  ExpectInvalid({{"REEL_RANK", "abc"}, {"REEL_WORLD_SIZE", "2"}}, "REEL_RANK=\"abc\"");
  ExpectInvalid({{"REEL_RANK", "1"}, {"REEL_WORLD_SIZE", "2x"}}, "REEL_WORLD_SIZE=\"2x\"");
  ExpectInvalid({{"REEL_RANK", ""}, {"REEL_WORLD_SIZE", "2"}}, "REEL_RANK=\"\"");
  ExpectInvalid({{"REEL_RANK", " 1"}, {"REEL_WORLD_SIZE", "2"}}, "REEL_RANK=\" 1\"");
  ExpectInvalid({{"REEL_RANK", "1"}, {"REEL_WORLD_SIZE", "99999999999"}}, "REEL_WORLD_SIZE");
}

TEST(RankEnvironment, RanksOutsideTheWorldAreRefused) {
  ExpectInvalid({{"REEL_RANK", "2"}, {"REEL_WORLD_SIZE", "2"}}, "REEL_RANK=2 is outside");
  ExpectInvalid({{"REEL_RANK", "-1"}, {"REEL_WORLD_SIZE", "2"}}, "REEL_RANK=-1 is outside");
  ExpectInvalid({{"REEL_RANK", "0"}, {"REEL_WORLD_SIZE", "0"}}, "REEL_WORLD_SIZE=0");
}

TEST(RankEnvironment, HalfAContextIsRefused) {
  ExpectInvalid({{"REEL_RANK", "1"}}, "REEL_WORLD_SIZE is not");
  ExpectInvalid({{"REEL_WORLD_SIZE", "4"}}, "REEL_RANK is not");
}

TEST(RankEnvironment, RecognisesMpiLaunchers) {
  EXPECT_EQ(MpiLauncherVariable(testing::FakeEnvironment({})), "");
  EXPECT_EQ(MpiLauncherVariable(testing::FakeEnvironment({{"OMPI_COMM_WORLD_RANK", "1"}})),
            "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(MpiLauncherVariable(testing::FakeEnvironment({{"PMIX_RANK", "0"}})), "PMIX_RANK");
  EXPECT_EQ(MpiLauncherVariable(testing::FakeEnvironment({{"PMIX_RANK", ""}})), "");
}

}  // namespace
}  // namespace reel::core
