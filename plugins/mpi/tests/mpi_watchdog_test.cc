// With blocking_allreduce, an AllReduce past its deadline cannot return: its watchdog must end the
// job (mpi_watchdog.h). Run as `mpirun -n 2 reel_mpi_watchdog_test` under tests/expect_abort.sh,
// which wants a non-zero exit and rank 0's line naming the deadline: rank 1 stays out of the
// AllReduce that rank 0 starts with a 300 ms deadline. Passing in-process is failing. CTest runs it
// at each thread level (test_thread_level.h): under serialized the stuck AllReduce holds the
// transport's MPI lock, which the watchdog must not wait for.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "mpi_communicator.h"
#include "test_thread_level.h"

namespace reel::mpi {
namespace {

using namespace std::chrono_literals;

TEST(MpiBlockingAllReduce, PastItsDeadlineAbortsTheJob) {
  Result<std::unique_ptr<Communicator>> c = MpiCommunicator::Connect(
      AtTestThreadLevel({.blocking_allreduce = true}), {kDiscover, kDiscover, ""}, DeadlineIn(60s));
  ASSERT_TRUE(c.ok()) << c.status();
  int provided = -1;
  MPI_Query_thread(&provided);
  ASSERT_EQ(provided, TestThreadLevel() == ThreadLevel::kSerialized ? MPI_THREAD_SERIALIZED
                                                                    : MPI_THREAD_MULTIPLE);
  ASSERT_GE((*c)->size(), 2) << "run under mpirun -n 2 or more";
  if ((*c)->rank() == 0) {
    std::vector<float> data(1000, 1.0f);
    Status s = (*c)->AllReduce(data, ReduceOp::kSum, DeadlineIn(300ms));
    ADD_FAILURE() << "the AllReduce that rank 1 stays out of returned: " << s;
  } else {
    // Stays out; the abort ends this process too. Far longer than the deadline, so that a
    // watchdog that never fires fails the test here instead of passing.
    std::this_thread::sleep_for(30s);
    ADD_FAILURE() << "still running 30 s after rank 0's AllReduce deadline of 300 ms";
  }
}

}  // namespace
}  // namespace reel::mpi
