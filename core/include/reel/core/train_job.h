// A training job from a run configuration: builds every rank's data sources, model, arena and
// optimizer through the registry, connects the ranks through the configured transport and runs
// the trainer on each (reel/core/trainer.h). Also what `reel eval` and `reel predict` share: a
// model rebuilt from a checkpoint (component options from a config: reel/core/trainer_options.h).
//
// Ranks and transport: see reel/core/rank_plan.h (trainer.local_ranks threads per process;
// REEL_RANK / REEL_WORLD_SIZE / REEL_COORDINATOR from a launcher, or discovered by the transport
// under mpirun; transport and optimizer default to the registry's defaults). Deadlines: Connect()
// waits transport.connect_timeout_seconds, every collective after it transport.timeout_seconds,
// so a rank that died or hangs is an error naming it, not a hang.
//
// Thread-safety: RunTrainJob blocks the calling thread; it starts and joins the rank threads.
#ifndef REEL_CORE_TRAIN_JOB_H_
#define REEL_CORE_TRAIN_JOB_H_

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "reel/core/config.h"
#include "reel/core/host.h"
#include "reel/core/rank_environment.h"
#include "reel/core/trainer.h"
#include "reel/core/trainer_options.h"

namespace reel::core {

// How the host runs a job, beyond its config: resuming, what it prints, when to stop, and the
// environment it reads.
struct TrainJobOptions {
  bool resume = false;
  int verbosity = 1;
  bool tty = false;
  std::ostream* progress = nullptr;
  std::function<bool(int64_t step)> should_stop;
  std::function<void(const TrainEvent&)> on_event;  // TrainerOptions::on_event
  // A world of one rank in this process, whatever the environment and the config's transport and
  // local_ranks say: for runs embedded in another job (a trial of `reel tune`).
  bool single_process = false;
  // Compute threads the model may use (ModelContext::threads); 0: the ranks sharing this
  // process's cores divide them (OMP_NUM_THREADS, when set, wins; core/src/train/thread_budget.h).
  int threads = 0;
  // Where REEL_RANK and the other launcher variables are read (tests give each simulated
  // process its own).
  GetEnv env = ProcessEnvironment();
};

// Runs the job. Errors name the section and component at fault (an unregistered component
// lists the registered ones) or the rank that failed.
Result<TrainResult> RunTrainJob(Host& host, const ConfigFile& cfg, const TrainJobOptions& options);

// A model rebuilt from a checkpoint (its config names the model and options) with the
// checkpoint's parameters; `threads` as ModelContext::threads (0: the default).
struct CheckpointModel {
  std::unique_ptr<ParamArena> arena;  // before `model`: it must outlive the model
  Owned<Model> model;
  ConfigFile config;  // the run's config as recorded in the checkpoint
  std::string uri;    // the checkpoint object read
  int64_t step = 0;
  int64_t num_classes = 0;
};
Result<CheckpointModel> LoadModelFromCheckpoint(Host& host, const std::string& path,
                                                int threads = 0);

}  // namespace reel::core

#endif  // REEL_CORE_TRAIN_JOB_H_
