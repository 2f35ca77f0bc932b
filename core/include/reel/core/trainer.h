// The training loop of one rank: batches from a DataSource → Model::Forward → the core loss →
// Model::Backward → global-norm clipping → Optimizer::Step(lr), with a step or epoch budget,
// periodic and final evaluation, progress, a JSON-lines metrics log, TensorBoard event files and
// checkpoints (resume from the newest one continues exactly where it stopped).
//
// The trainer knows no particular model, reader, optimizer or transport: it talks to the SDK
// interfaces only. Every rank of a run (threads of one process with the inproc transport, or one
// process per rank with tcp/mpi) runs this same loop with its own components; the ranks agree
// each step, through the communicator, on whether every one of them still has a batch and whether
// one was interrupted, so they always leave an epoch and stop together. Rank 0 alone prints,
// logs and writes checkpoints (gathering every rank's data position into them).
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

struct TrainerOptions {
  int64_t steps = 0;   // step budget; 0: run `epochs` epochs
  int64_t epochs = 1;  // epoch budget when steps == 0
  uint64_t seed = 0;
  LrScheduleConfig learning_rate;      // total_steps is filled from `steps` when 0
  double clip_norm = 1.0;              // global gradient-norm clip; <= 0 disables
  int64_t eval_every_steps = 0;        // 0: evaluate at the end only (when an eval source is given)
  int64_t log_every_steps = 50;        // plain progress lines and metrics-log entries
  int64_t checkpoint_every_steps = 0;  // 0: only at the end
  int keep_checkpoints = 3;
  std::string checkpoint_dir;   // empty: no checkpoints
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
  // The training ranks' own group (Communicator::Split) when the optimizer has server-only ranks
  // (Optimizer::HasServerOnlyRanks), null otherwise. On a server-only rank `train` may be null.
  Communicator* group = nullptr;
};

struct TrainResult {
  int64_t steps = 0;     // steps completed, counting those before a resume
  int64_t examples = 0;  // over all ranks
  int64_t epoch = 0;
  double last_loss = 0.0;  // mean over the last logging window, all ranks
  std::optional<EvalMetrics> final_eval;
  // Every evaluation of this call, in order, with the step it ran at (eval_every_steps and the
  // final one): a learning curve for callers such as a hyperparameter search.
  std::vector<std::pair<int64_t, EvalMetrics>> evals;
  bool interrupted = false;
  bool resumed = false;
  std::string last_checkpoint;  // URI, empty if none was written
  bool served_only = false;     // a server-only rank (Optimizer::IsServerOnly): it did not train
};

// Initializes the model from options.seed (or restores the newest checkpoint when resuming),
// sets up the optimizer and trains. `storage` resolves the checkpoint, log and event URIs.
Result<TrainResult> RunTrainer(const TrainerOptions& options, const RankComponents& rank,
                               StorageResolver& storage);

}  // namespace reel::core

#endif  // REEL_CORE_TRAINER_H_
