// Running a process's ranks: every rank runs, and the reported error is the root cause.
#include "train/local_ranks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

namespace reel::core {
namespace {

using ::testing::HasSubstr;

TEST(LocalRanks, EveryRankRunsOnceAndResultsKeepTheirOrder) {
  std::atomic<int> calls{0};
  auto results = RunOnThreads<int>(4, [&](int i) -> Result<int> {
    calls.fetch_add(1);
    return i * 10;
  });
  EXPECT_EQ(calls.load(), 4);
  ASSERT_EQ(results.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(*results[static_cast<size_t>(i)], i * 10);
}

TEST(LocalRanks, RootCauseSkipsPeersThatMerelyLostTheFailingRank) {
  std::vector<Result<int>> results;
  results.emplace_back(UnavailableError("rank 2 has left"));
  results.emplace_back(DeadlineExceededError("waiting for rank 2"));
  results.emplace_back(InvalidArgumentError("bad batch"));
  const int ranks[] = {4, 5, 6};
  Result<int> cause = RootCause(std::move(results), ranks);
  ASSERT_FALSE(cause.ok());
  EXPECT_EQ(cause.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cause.status().message(), "rank 6: bad batch");
}

TEST(LocalRanks, OnlyLostPeersReportTheFirstAndOneRankIsNotRenamed) {
  std::vector<Result<int>> lost;
  lost.emplace_back(7);
  lost.emplace_back(UnavailableError("rank 0 has left"));
  const int ranks[] = {0, 1};
  Result<int> cause = RootCause(std::move(lost), ranks);
  EXPECT_EQ(cause.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(cause.status().message(), HasSubstr("rank 1: "));

  std::vector<Result<int>> one;
  one.emplace_back(DataLossError("shard.tfrecord: offset 12"));
  const int only[] = {3};
  EXPECT_EQ(RootCause(std::move(one), only).status().message(), "shard.tfrecord: offset 12");

  std::vector<Result<int>> fine;
  fine.emplace_back(1);
  fine.emplace_back(2);
  EXPECT_EQ(*RootCause(std::move(fine), ranks), 1);
}

}  // namespace
}  // namespace reel::core
