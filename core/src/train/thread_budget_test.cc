// Compute threads per rank when ranks share a host (train/thread_budget.h).
#include "train/thread_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include "comm/fake_environment.h"

namespace reel::core {
namespace {

using testing::FakeEnvironment;
using ::testing::HasSubstr;

// Threads per rank for `ranks_in_process` ranks, this process's mask holding `cores` of `online`.
int Threads(std::map<std::string, std::string> env, int ranks_in_process, int cores,
            int online = 0) {
  Result<ThreadBudget> b =
      ThreadsPerRank(FakeEnvironment(std::move(env)), ranks_in_process, cores, online);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? b->threads : -1;
}

TEST(ThreadBudget, OneRankAloneKeepsItsCores) {
  Result<ThreadBudget> b = ThreadsPerRank(FakeEnvironment({}), 1, 8, 8);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->threads, 0);
  EXPECT_EQ(b->why, "");
  EXPECT_EQ(Threads({{"REEL_LOCAL_WORLD_SIZE", "1"}}, 1, 8), 0);
  EXPECT_EQ(Threads({{"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}, 1, 8), 0);
}

TEST(ThreadBudget, RanksOfOneProcessDivideItsCores) {
  EXPECT_EQ(Threads({}, 2, 8), 4);
  EXPECT_EQ(Threads({}, 2, 2), 1);
  EXPECT_EQ(Threads({}, 3, 8), 2);  // rounded down: never more threads than cores
  EXPECT_EQ(Threads({}, 4, 2), 1);  // more ranks than cores: one thread each, never none
}

TEST(ThreadBudget, ReelLaunchsProcessesOnThisHostShareItsCores) {
  EXPECT_EQ(Threads({{"REEL_LOCAL_WORLD_SIZE", "2"}}, 1, 2, 2), 1);  // reel launch -n 2, 2 cores
  EXPECT_EQ(Threads({{"REEL_LOCAL_WORLD_SIZE", "2"}}, 2, 8, 8), 2);  // 2 processes x 2 ranks
  // In a container (a cpuset of 4 of 16): reel launch binds nothing, so all of them share it.
  EXPECT_EQ(Threads({{"REEL_LOCAL_WORLD_SIZE", "2"}}, 1, 4, 16), 2);
  // reel launch's own count first.
  EXPECT_EQ(Threads({{"REEL_LOCAL_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}}, 1, 8, 8),
            4);
}

TEST(ThreadBudget, AnMpiLaunchersBindingIsTakenIntoAccount) {
  // Not bound (the mask is the machine): every local process shares it.
  EXPECT_EQ(Threads({{"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}, 1, 8, 8), 2);
  EXPECT_EQ(Threads({{"MPI_LOCALNRANKS", "4"}}, 1, 4, 4), 1);
  // Bound to a core each: nothing to divide.
  EXPECT_EQ(Threads({{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}, 1, 1, 2), 0);
  // 4 ranks bound to the sockets of a 2 x 8-core machine: two share each socket's 8 cores.
  EXPECT_EQ(Threads({{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}, 1, 8, 16), 4);
  // 3 ranks over 2 sockets: up to two share a socket.
  EXPECT_EQ(Threads({{"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}, 1, 8, 16), 4);
}

TEST(ThreadBudget, SaysWhatItDividedByWhat) {
  Result<ThreadBudget> b =
      ThreadsPerRank(FakeEnvironment({{"REEL_LOCAL_WORLD_SIZE", "2"}}), 2, 8, 8);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->why,
            "4 ranks share this process's 8 core(s) (REEL_LOCAL_WORLD_SIZE=2, 2 in this process): "
            "2 compute thread(s) per rank (OMP_NUM_THREADS=N sets another count)");
  b = ThreadsPerRank(FakeEnvironment({}), 3, 2, 2);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->why,
            "3 ranks share this process's 2 core(s) (3 in this process): 1 compute thread(s) per "
            "rank (OMP_NUM_THREADS=N sets another count)");
}

TEST(ThreadBudget, OmpNumThreadsIsTheUsersChoice) {
  EXPECT_EQ(Threads({{"OMP_NUM_THREADS", "2"}, {"REEL_LOCAL_WORLD_SIZE", "4"}}, 1, 8), 0);
  EXPECT_EQ(Threads({{"OMP_NUM_THREADS", "1"}}, 4, 8), 0);
}

TEST(ThreadBudget, AProcessCountThatIsNotOneOrMoreIsRefusedNamingIt) {
  for (const char* bad : {"abc", "0", "-2", "2x", ""}) {
    Result<ThreadBudget> b =
        ThreadsPerRank(FakeEnvironment({{"REEL_LOCAL_WORLD_SIZE", bad}}), 1, 8, 8);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(b.status().message(), HasSubstr("REEL_LOCAL_WORLD_SIZE")) << bad;
  }
  Result<ThreadBudget> b =
      ThreadsPerRank(FakeEnvironment({{"OMPI_COMM_WORLD_LOCAL_SIZE", "two"}}), 1, 8, 8);
  EXPECT_THAT(b.status().message(), HasSubstr("OMPI_COMM_WORLD_LOCAL_SIZE"));
}

TEST(ThreadBudget, ScopedThreadsSetsTheTeamAndPutsItBack) {
  const int before = omp_get_max_threads();
  {
    ScopedThreads team(before + 3);
    EXPECT_EQ(omp_get_max_threads(), before + 3);
  }
  EXPECT_EQ(omp_get_max_threads(), before);
  {
    ScopedThreads none(0);
    EXPECT_EQ(omp_get_max_threads(), before);
  }
  EXPECT_EQ(omp_get_max_threads(), before);
}

}  // namespace
}  // namespace reel::core
