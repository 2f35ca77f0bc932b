// The training loop of one rank: batches from a DataSource → Model::Forward → the core loss →
// Model::Backward → global-norm clipping → Optimizer::Step(lr), with a step or epoch budget,
// periodic and final evaluation, progress, a JSON-lines metrics log, TensorBoard event files and
// checkpoints (resume from the newest one continues exactly where it stopped).
//
// The trainer talks to the SDK interfaces only. Every rank of a run (threads of one process with
// inproc, or one process per rank with tcp/mpi) runs this loop with its own components; the
// ranks agree each step on whether every one still has a batch and whether one was interrupted,
// so they leave an epoch and stop together. Rank 0 alone prints, logs and writes checkpoints
// (gathering every rank's data position into them).
//
// Ranks that step independently (RankRoles::TrainsIndependently: server-only ranks, or async_sgd
// colocated) keep together through their servers instead: no per-step agreement, each its own
// epoch share and logging window, and point-to-point reports to the lead (train/
// worker_reports.h). A training rank that dies is dropped and listed in TrainResult::lost_ranks
// while the others finish; a lost lead is replaced by RankRoles::LeadAfter, which takes over
// logging, evaluation and checkpoints (plugins/async_sgd/README.md). An optimizer that cannot
// name a successor stops the run naming the lost lead (`--resume` continues it).
//
// Thread-safety: RunTrainer is called once per rank, each on its own thread; the components of
// a rank are used only by that call.
#ifndef REEL_CORE_TRAINER_H_
#define REEL_CORE_TRAINER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "reel/core/metrics.h"
#include "reel/core/schedule.h"
#include "reel/core/timeouts.h"
#include "reel/data_source.h"
#include "reel/model.h"
#include "reel/optimizer.h"
#include "reel/param_arena.h"
#include "reel/status.h"
#include "reel/storage.h"
#include "reel/transport.h"

namespace reel::core {

// What the lead tells an observer (TrainerOptions::on_event) as the run goes: a logged window
// (kind kLog: the loss, rates and learning rate of the steps since the previous one) or an
// evaluation (kind kEval: `eval`). The same values the metrics log records. `examples_per_sec`
// is the whole job's: the examples every training rank trained on in the window (ranks that
// step independently: whose updates the parameter holders applied in it) per second;
// `worker_examples_per_sec` the lead's own.
struct TrainEvent {
  enum class Kind { kLog, kEval };
  Kind kind = Kind::kLog;
  int64_t step = 0;
  int64_t epoch = 0;
  double loss = 0.0, lr = 0.0, examples_per_sec = 0.0, grad_norm = 0.0;  // kLog
  double worker_examples_per_sec = 0.0;                                  // kLog
  EvalMetrics eval;                                                      // kEval
};

// The trainer section of a run config, checked (reel/core/trainer_options.h builds it).
struct TrainerOptions {
  int64_t steps = 0;   // step budget; 0: run `epochs` epochs
  int64_t epochs = 1;  // epoch budget when steps == 0
  uint64_t seed = 0;
  LrScheduleConfig learning_rate;  // both totals 0: filled from `steps` (or `epochs`)
  // trainer.learning_rate.scaling ("none" or "linear") and reference_ranks (0: the ranks the run
  // started with): the rate at N training ranks is the schedule's times N / reference under
  // "linear" (docs/distributed.md, "The learning rate at another size").
  std::string lr_scaling = "none";
  int64_t lr_reference_ranks = 0;
  double clip_norm = 1.0;              // global gradient-norm clip; <= 0 disables
  int64_t eval_every_steps = 0;        // 0: evaluate at the end only (when an eval source is given)
  int64_t log_every_steps = 50;        // plain progress lines and metrics-log entries
  int64_t checkpoint_every_steps = 0;  // 0: only at the end
  int keep_checkpoints = 3;
  std::string checkpoint_dir;  // empty: no checkpoints
  // In-memory commits every this many steps (0: none), kept in files of `commit_dir` named by
  // `commit_job` (the launch's job identity, "" if none) and checkpoint_dir; a resume takes the
  // newest of them and the checkpoints (docs/distributed.md, "In-memory commits").
  int64_t commit_every_steps = 0;
  std::string commit_dir = "/dev/shm";
  std::string commit_job;
  // A failed periodic checkpoint write: "stop" ends the run with the error; "continue" reports
  // it (TrainResult::checkpoint_failures) and trains on. The last checkpoint of a run always
  // stops it with the error.
  std::string on_checkpoint_failure = "stop";
  // A non-finite loss or gradient ends the run with FailedPrecondition naming the step (and
  // what: the loss, or the parameter whose gradient), before any checkpoint of that step; false
  // trains on (docs/training.md).
  bool stop_on_nonfinite = true;
  // "fp32", "bf16" or "auto" as the config says; RunTrainJob resolves it for the CPU
  // (docs/training.md) and hands the model the result.
  std::string precision = "fp32";
  std::string metrics_log;      // empty: none
  std::string tensorboard_dir;  // empty: none
  int64_t num_classes = 3862;
  int eval_top_k = 20;
  std::string model_name;   // recorded in (and checked against) checkpoints
  std::string config_text;  // recorded in checkpoints
  bool resume = false;      // continue from the newest checkpoint in checkpoint_dir
  // How long each collective with the other ranks (the per-step agreement, evaluation and
  // checkpoint gathers) may wait; past it the run fails naming what it waited for.
  std::chrono::milliseconds timeout = kDefaultTimeout;

  // Progress: 0 quiet (errors only), 1 normal, 2 verbose. On a terminal (`tty`) a live line is
  // redrawn in place; otherwise a plain line every log_every_steps.
  int verbosity = 1;
  bool tty = false;
  std::ostream* progress = nullptr;  // null: no progress output
  // Polled after every step (e.g. a SIGINT flag); true finishes the step, writes a checkpoint
  // and returns with `interrupted` set. Null: never.
  std::function<bool(int64_t step)> should_stop;
  // Called on the lead's thread after each logged window and each evaluation (an embedding host's
  // callbacks: the Python module's). It may ask the run to stop through should_stop. Null: none.
  std::function<void(const TrainEvent&)> on_event;
};

// One rank's components; none owned, all outlive the call. The arena is finalized and declared
// by `model`; `eval` may be null.
struct RankComponents {
  DataSource* train = nullptr;
  DataSource* eval = nullptr;
  Model* model = nullptr;
  ParamArena* arena = nullptr;
  Optimizer* optimizer = nullptr;
  Communicator* comm = nullptr;  // with working collectives; size 1 for a single process
  // The training ranks' own group (Communicator::Split) when they step independently
  // (RankRoles::TrainsIndependently), null otherwise. On a server-only rank `train` may be null.
  Communicator* group = nullptr;
};

// A training rank that was lost while the others went on (optimizers whose training ranks step
// independently, see RunTrainer): what of its share it did not train, as far as the lead knows.
struct LostRank {
  int rank = -1;          // in the whole world; -1 if it was lost before it reported anything
  int group_rank = 0;     // among the training ranks
  int64_t last_step = 0;  // its step at its last report (start or checkpoint)
  // Its step after its newest update that reached the parameters, and the updates applied in
  // this session, as the optimizer's parameter holders counted them (RankRoles::AppliedWorkOf);
  // -1 if the optimizer cannot tell.
  int64_t applied_step = -1;
  int64_t applied_updates = -1;
  // Its step budget minus applied_step (last_step when that is unknown), and that many steps at
  // its own mean batch; -1 if unknown (an epoch budget whose epoch length is not known yet).
  int64_t steps_not_trained = -1;
  int64_t examples_not_trained = -1;
  std::string position;  // its data position at its last report: where a resume continues it
  std::string why;       // the error that showed it was lost
};

// Where a training rank's time went, in seconds (docs/training.md, "Where the time goes"): the
// parts of the loop one after the other, so the largest names what limits the run.
struct TimeBreakdown {
  double data = 0.0;        // waiting for the next batch (reading and decoding not yet done)
  double compute = 0.0;     // forward, loss, backward and gradient clipping
  double update = 0.0;      // the optimizer's step: exchange with the other ranks and apply
  double wait = 0.0;        // agreeing with the other ranks on each step (their lateness)
  double evaluation = 0.0;  // held-out evaluations
  double checkpoint = 0.0;  // gathering positions and writing checkpoints
  double total = 0.0;       // the whole loop (the rest: logging, epoch ends)
  // Each part but the total, named as in metrics.jsonl ("data_seconds" is "data"), in order.
  std::vector<std::pair<const char*, double>> parts() const;
  // The name of the part with the most seconds.
  const char* largest() const;
};
// Part by part (a logging window's share of a run's).
TimeBreakdown operator-(const TimeBreakdown& a, const TimeBreakdown& b);

// What a finished (or stopped) run reports.
struct TrainResult {
  int64_t steps = 0;           // steps completed, counting those before a resume
  int64_t steps_this_run = 0;  // of them, taken by this call (0: a resume found nothing to do)
  int64_t examples = 0;        // over all ranks
  int64_t epoch = 0;
  double last_loss = 0.0;  // mean over the last logging window, all ranks
  std::optional<EvalMetrics> final_eval;
  // Every evaluation of this call, in order, with the step it ran at (eval_every_steps and the
  // final one): a learning curve for callers such as a hyperparameter search.
  std::vector<std::pair<int64_t, EvalMetrics>> evals;
  bool interrupted = false;
  bool resumed = false;
  std::string last_checkpoint;  // URI, empty if none was written
  // Periodic checkpoints that could not be written (on_checkpoint_failure "continue"), the lead
  // only; the error of the newest of them.
  int64_t checkpoint_failures = 0;
  std::string last_checkpoint_error;
  bool served_only = false;  // a server-only rank (RankRoles::IsServerOnly): it did not train
  // The training ranks stepped on their own (RankRoles::TrainsIndependently): `steps`, `epoch`
  // and `last_loss` are this rank's. `examples` still counts every rank's on the lead, which
  // waits for every worker's final report; on another rank only what it heard of the others
  // (examples_complete false).
  bool independent = false;
  bool examples_complete = true;
  std::vector<LostRank> lost_ranks;  // the lead only: training ranks dropped during the run
  TimeBreakdown time;                // this rank's, in this call
};

// Initializes the model from options.seed (or restores the newest checkpoint when resuming),
// sets up the optimizer and trains. `storage` resolves the checkpoint, log and event URIs.
Result<TrainResult> RunTrainer(const TrainerOptions& options, const RankComponents& rank,
                               StorageResolver& storage);

}  // namespace reel::core

#endif  // REEL_CORE_TRAINER_H_
