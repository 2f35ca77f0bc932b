// Where trials run. The scheduler (tuner.cc) starts a trial whenever a slot is free and waits for
// whichever ends first, so a slow trial never holds the others up. Two executors:
//   - threads of this process, `slots` at a time (ThreadExecutor);
//   - worker ranks of a Communicator, each asking rank 0 for work when free
//     (distributed_executor.cc).
//
// Thread-safety: Start and Wait are called from the scheduler's thread only.
#ifndef REEL_CORE_SRC_TUNE_EXECUTOR_H_
#define REEL_CORE_SRC_TUNE_EXECUTOR_H_

#include <memory>

#include "reel/core/tune.h"
#include "search.h"

namespace reel::core::tune {

struct TrialJob {
  TrialSpec spec;
  int attempt = 1;
  TrialRequest request;  // request.should_stop is set by the executor
};

struct Completion {
  TrialJob job;
  Result<TrialRun> run = InternalError("trial did not run");
  double seconds = 0;
  int worker = 0;  // the slot or rank that ran it
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual int slots() const = 0;
  // Starts `job`. REQUIRES: fewer than slots() jobs started and not yet returned by Wait().
  virtual void Start(TrialJob job) = 0;
  // Blocks until a started job ends and returns it. REQUIRES: a job is outstanding.
  virtual Completion Wait() = 0;
};

// Runs each trial on a thread of its own, at most `slots` at once. `stop` is polled by the
// trials (through request.should_stop); the executor joins every thread before it is destroyed.
std::unique_ptr<Executor> MakeThreadExecutor(int slots, TrialRunner runner,
                                             std::function<bool()> stop);

// Rank 0 of `comm` schedules; its slots are the other ranks, each running RunTuneWorker. Sends
// every live worker a stop when destroyed.
std::unique_ptr<Executor> MakeDistributedExecutor(Communicator& comm);

// The loop of a worker rank (rank != 0): runs the trials rank 0 sends until it says stop. An
// error when rank 0 is gone.
Status RunTuneWorker(Communicator& comm, const TrialRunner& runner,
                     const std::function<bool()>& should_stop);

}  // namespace reel::core::tune

#endif  // REEL_CORE_SRC_TUNE_EXECUTOR_H_
