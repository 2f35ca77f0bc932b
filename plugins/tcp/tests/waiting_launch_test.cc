// How a group started by `reel launch` waits in AllReduce, read from the line each rank logs when
// the group forms: CTest runs this under `reel launch -n 2` and `-n 3`. Every rank first narrows
// itself to two cores (as many as the machine these figures come from has), so on any machine
// with at least two the automatic rule must choose polling for 2 ranks and sleeping for 3. The
// rank count in the line comes from the rendezvous (every rank's machine id), not from reel
// launch's variables, which ranks started otherwise do not have.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "reel/core/rank_environment.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::HasSubstr;

// Keeps this thread (and the threads it starts) on the first two cores it may use; false if it
// may use fewer.
bool NarrowToTwoCores() {
  cpu_set_t allowed, two;
  CPU_ZERO(&allowed);
  CPU_ZERO(&two);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  for (int cpu = 0, kept = 0; cpu < CPU_SETSIZE && kept < 2; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) CPU_SET(cpu, &two), ++kept;
  return CPU_COUNT(&two) == 2 && sched_setaffinity(0, sizeof two, &two) == 0;
}

TEST(TcpWaitingUnderLaunch, PollsWhenTheRanksFitTwoCoresAndSleepsWhenTheyDoNot) {
  Result<TransportContext> ctx = core::TransportContextFromEnvironment();
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  if (ctx->world_size != 2 && ctx->world_size != 3)
    GTEST_SKIP() << "start this under `reel launch -n 2` or `-n 3`";
  if (!NarrowToTwoCores()) GTEST_SKIP() << "this machine lets this process use fewer than 2 cores";
  TcpOptions options = TestOptions();
  options.allreduce_spin.reset();  // automatic, as `reel train` runs it
  options.secret = std::getenv("REEL_SECRET") ? std::getenv("REEL_SECRET") : "";
  CapturedStderr captured;
  auto comm = MakeTcpTransport(options)->Connect(*ctx, DeadlineIn(std::chrono::seconds(60)));
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<float> data(1000, 1.0f);
  ASSERT_TRUE((*comm)->AllReduce(data, ReduceOp::kSum, DeadlineIn(std::chrono::seconds(60))).ok());
  EXPECT_EQ(data[999], static_cast<float>(ctx->world_size));
  const std::string log = captured.Restore();
  const std::string rank = "reel tcp: ";
  if (ctx->world_size == 2)
    EXPECT_THAT(log,
                HasSubstr(rank + "AllReduce waits by polling (for up to 20000 us once nothing "
                                 "moves, then sleeps) (automatic: 2 rank(s) of the group on this "
                                 "host, 2 core(s) for this rank"));
  else
    EXPECT_THAT(log, HasSubstr(rank + "AllReduce waits by sleeping (automatic: 3 rank(s) of the "
                                      "group on this host, 2 core(s) for this rank"));
}

}  // namespace
}  // namespace reel::tcp::testing
