// The worker side of async_sgd (Downpour SGD, Dean et al. 2012): computes gradients on its local
// copy of the parameters, pushes them (averaged over push_every steps) to the shard servers and
// pulls fresh weights every pull_every steps, straight into its arena. With apply_locally, the
// client as Dean et al. publish it: each gradient also updates the local copy (plain sgd), and a
// push carries the sum of the gradients since the last one. With frequency: epoch it
// trains its copy locally with the update rule and pushes the parameter delta once per epoch
// (what Elephas does). Requests go to every server before any reply is awaited, so the servers
// work on their shards at once. A step that pushes and pulls does both in one exchange
// (`pipeline`): the push streams out in chunks, and the server, once it has it whole, streams the
// fresh chunks back. With `overlap`, a step's push and pull run on a thread of their own while the
// trainer computes the next step; the pulled weights are put in place at the start of the step
// after (so a gradient is computed on weights one exchange older, and its push says so: every push
// carries the versions its gradient was computed on, which the servers' staleness counts from).
//
// Thread-safety: one thread (the optimizer's), plus the exchange thread with `overlap`, which
// every method waits for before it touches what the exchange uses.
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_WORKER_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_WORKER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "async_config.h"
#include "reel/optimizer.h"
#include "reel/param_arena.h"
#include "reel/update_rule.h"
#include "wire.h"

namespace reel::async_sgd {

class Worker {
 public:
  static Result<std::unique_ptr<Worker>> Create(const AsyncConfig& config, const Roles& roles,
                                                Communicator& comm, ParamArena& arena);
  ~Worker();

  Status Step(float lr);
  Status EndEpoch();
  // Pushes what is pending, then pulls every shard.
  Status Refresh();
  // Pushes what is pending and tells every server this worker is done.
  Status Finish();
  // A cut of every shard, for a checkpoint: pushes what is pending, then has each server answer
  // with its shard's values, version and state of one instant (wire.h, kState). The values go
  // into the arena and the versions become this worker's, as a pull's; the states (each starting
  // with its version) are returned in shard order, so the arena and the states are one snapshot.
  Result<std::vector<std::string>> CollectCut();
  // After a resume: the versions the restored parameters correspond to.
  void SetVersions(std::vector<int64_t> versions) { versions_ = std::move(versions); }
  // Before Step(): the trainer's step after it and its batch's examples, which the pushes carry
  // (wire.h). Without it a push carries this worker's own count of steps and no examples.
  void NoteStep(int64_t step, int64_t examples) {
    noted_step_ = step;
    unpushed_examples_ += examples;
  }
  // What the servers applied of worker rank `rank`'s pushes, once they dropped it: the server
  // that applied the fewest (a push reaches the servers one after another) speaks for all.
  Result<AppliedWork> AppliedWorkOf(int rank);
  // Who leads the workers once worker rank `lost` (the lead) is gone, as the first server sees
  // it (wire.h, kLead): every worker that asks hears the same. `lost` itself if that server
  // still serves it at the deadline.
  Result<int> LeadAfter(int lost);

  // The examples that the pushes of every worker the first server applied so far carried,
  // summed (wire.h, kExamples): the whole job's work that reached the parameters.
  Result<int64_t> ExamplesApplied();

  // Global progress for the learning-rate schedule: updates applied to shard 0 (as last heard),
  // in per-worker steps.
  int64_t ScheduleStep(int64_t local_step) const;
  int64_t pushes_sent() const { return pushes_; }
  int64_t pulls() const { return pulls_; }
  int64_t forced_pulls() const { return forced_pulls_; }  // by max_staleness
  // Pushes (to one shard each) the servers refused as staler than max_staleness.
  int64_t refused_pushes() const { return refused_; }

 private:
  Worker(const AsyncConfig& config, const Roles& roles, Communicator& comm, ParamArena& arena,
         std::unique_ptr<UpdateRule> local_rule);
  // What a push carries besides its payload (wire.h).
  struct Carried {
    int64_t step = 0, steps = 0, examples = 0;
  };
  // The worker's step after its newest local step: the trainer's if it noted one.
  int64_t CurrentStep() const { return noted_step_ >= 0 ? noted_step_ : steps_; }
  // What the next push carries: the steps and examples since the last push (reset).
  Carried TakeCarried();
  // Pushes `data`, computed on the shards' versions `based_on` (what the servers judge its
  // staleness by).
  Status Push(Kind kind, std::span<const float> data, const std::vector<int64_t>& based_on,
              float lr, const Carried& carried);
  // Counts a shard's answer to a push: applied, or refused as too stale (then pulls next).
  void Counted(int shard, bool refused);
  // Pulls every shard into `into` (the arena's values, or the overlap's inbox) and their
  // versions into `versions`; `step` goes in the requests.
  Status Pull(std::span<float> into, std::vector<int64_t>& versions, int64_t step);
  Status Pull() { return Pull(arena_.values(), versions_, CurrentStep()); }
  // overlap: waits for the exchange in flight and puts the weights it pulled in place.
  Status Settle();
  // overlap: starts the exchange of this step (push `outbox_`, computed on `based_on`, if
  // `push`, then pull if `pull`).
  void StartExchange(bool push, bool pull, float lr, std::vector<int64_t> based_on);
  // push_every > 1: adds a step's gradient, computed on `computed_on`, to the pending sum.
  void Accumulate(std::span<const float> grads, const std::vector<int64_t>& computed_on, float lr);
  Status PushPending();
  // push_every > 1: the pending sum becomes its mean (stays the sum with apply_locally); then
  // cleared after its push.
  void AveragePending();
  void ClearPending();
  // A step that pushes and pulls sends and receives at once (wire.h, kPushPull).
  bool Pipelined() const { return config_.pipeline && config_.locking && !config_.per_epoch; }
  // Pushes `data` (computed on `based_on`) to every server and pulls every shard into `into`
  // (their versions into `versions`), in one pipelined exchange.
  Status PushPull(std::span<const float> data, const std::vector<int64_t>& based_on,
                  std::span<float> into, std::vector<int64_t>& versions, float lr,
                  const Carried& carried);
  Deadline NextDeadline() const;
  std::string Where() const;
  ShardRange Range(int shard) const { return ShardOf(arena_.total_size(), roles_.servers, shard); }

  const AsyncConfig config_;
  const Roles roles_;
  Communicator& comm_;
  ParamArena& arena_;
  std::unique_ptr<UpdateRule> local_rule_;  // frequency: epoch only
  std::vector<float> pending_;  // step: summed gradients; epoch: the values at the last pull
  int64_t pending_steps_ = 0;   // local steps not pushed yet
  float pending_lr_ = 0.0f;     // the newest lr of the pending steps
  int64_t steps_ = 0;           // local steps taken
  int64_t noted_step_ = -1;     // the trainer's step (NoteStep), -1 if it noted none
  int64_t unpushed_steps_ = 0, unpushed_examples_ = 0;  // taken by the next push
  int64_t pushes_ = 0;                                  // pushes sent to each server
  std::vector<int64_t> versions_;           // per shard: the version of the weights in the arena
  std::vector<int64_t> pending_based_on_;   // push_every > 1: versions of the oldest pending step
  std::vector<int64_t> applied_;            // per shard: pushes it applied (kDone carries it)
  int64_t refused_ = 0;                     // shard pushes refused by max_staleness
  std::atomic<int64_t> newest_version_{0};  // shard 0's version as last heard
  bool must_pull_ = false;                  // max_staleness exceeded
  int64_t pulls_ = 0, forced_pulls_ = 0;
  // overlap: the exchange in flight, its result, what it pushes and where it pulls to.
  std::thread exchange_;
  Status exchange_status_;
  std::vector<float> outbox_, inbox_;
  std::vector<int64_t> inbox_versions_;  // the versions of the weights in inbox_
  bool inbox_full_ = false;
};

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_WORKER_H_
