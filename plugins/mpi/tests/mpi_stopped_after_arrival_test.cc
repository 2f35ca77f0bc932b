// A rank stopped (SIGSTOP) once every rank has arrived at an AllReduce: the native data phase
// cannot time out, so the watchdog must end the job at the deadline, naming the call, instead of
// every rank hanging for ever (mpi_watchdog.h). Run as `mpirun -n 2` under tests/expect_abort.sh,
// which wants a non-zero exit and rank 0's line. Passing in-process is failing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "mpi_communicator.h"

namespace reel::mpi {
namespace {

using namespace std::chrono_literals;

// Far more than the 50 ms before rank 1 stops itself takes to reduce (512 MiB a rank).
constexpr size_t kFloats = size_t{1} << 27;

TEST(MpiStoppedAfterArrival, TheWatchdogEndsTheJobAtTheDeadline) {
  Result<std::unique_ptr<Communicator>> c =
      MpiCommunicator::Connect({}, {kDiscover, kDiscover, ""}, DeadlineIn(60s));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ((*c)->size(), 2) << "run under mpirun -n 2";
  std::vector<float> data(kFloats, 1.0f);
  ASSERT_TRUE((*c)->Barrier(DeadlineIn(60s)).ok());
  if ((*c)->rank() == 1) {
    // Stops this whole process 50 ms into the AllReduce: well after the arrival round.
    std::thread([] {
      std::this_thread::sleep_for(50ms);
      kill(getpid(), SIGSTOP);
    }).detach();
  }
  Status s = (*c)->AllReduce(data, ReduceOp::kSum, DeadlineIn((*c)->rank() == 0 ? 2s : 600s));
  ADD_FAILURE() << "rank " << (*c)->rank() << ": the AllReduce returned: " << s;
}

}  // namespace
}  // namespace reel::mpi
