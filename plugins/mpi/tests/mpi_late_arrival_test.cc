// A rank whose AllReduce arrival times out cannot take its arrival back: a late peer may still
// complete the arrival and then wait in the native call for this rank, which never comes. So the
// rank that gave up does not finalise MPI, and its exit ends the job (mpirun) instead of leaving
// the late ranks stuck (mpi_communicator.h). Run under tests/expect_abort.sh, which wants a
// non-zero exit and rank 0's DeadlineExceeded line: rank 0 gives up after 200 ms, the others
// arrive after 1 s. As 2 ranks (one message each way) and 3 (recursive doubling).
// Without the rule the job hangs until CTest's timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "mpi_communicator.h"

namespace reel::mpi {
namespace {

using namespace std::chrono_literals;

TEST(MpiArrival, ARankThatGaveUpEndsTheJobInsteadOfLeavingTheOthersStuck) {
  Result<std::unique_ptr<Communicator>> c =
      MpiCommunicator::Connect({}, {kDiscover, kDiscover, ""}, DeadlineIn(60s));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_GE((*c)->size(), 2) << "run under mpirun -n 2 or more";
  std::vector<float> data(kExchangeBelowBytes / sizeof(float) + 1, 1.0f);
  if ((*c)->rank() == 0) {
    Status s = (*c)->AllReduce(data, ReduceOp::kSum, DeadlineIn(200ms));
    // One write, so that mpirun's --tag-output keeps the line whole.
    std::cerr << ("rank 0 gave up: " + s.ToString() + "\n") << std::flush;
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    return;  // and exits, without finalising MPI
  }
  std::this_thread::sleep_for(1s);
  Status s = (*c)->AllReduce(data, ReduceOp::kSum, DeadlineIn(30s));
  ADD_FAILURE() << "rank " << (*c)->rank() << "'s AllReduce returned: " << s;
}

}  // namespace
}  // namespace reel::mpi
