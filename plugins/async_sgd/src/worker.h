// The worker side of async_sgd (Downpour SGD, Dean et al. 2012): computes gradients on its local
// copy of the parameters, pushes them (averaged over push_every steps) to the shard servers and
// pulls fresh weights every pull_every steps, straight into its arena. With frequency: epoch it
// trains its copy locally with the update rule and pushes the parameter delta once per epoch
// (what Elephas does). Requests go to every server before any reply is awaited, so the servers
// work on their shards at once.
//
// Thread-safety: one thread (the optimizer's).
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_WORKER_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_WORKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "async_config.h"
#include "reel/param_arena.h"
#include "reel/update_rule.h"
#include "wire.h"

namespace reel::async_sgd {

class Worker {
 public:
  static Result<std::unique_ptr<Worker>> Create(const AsyncConfig& config, const Roles& roles,
                                                Communicator& comm, ParamArena& arena);

  Status Step(float lr);
  Status EndEpoch();
  // Pushes what is pending, then pulls every shard.
  Status Refresh();
  // Pushes what is pending and tells every server this worker is done.
  Status Finish();
  // Every shard's state, from its server, in shard order.
  Result<std::vector<std::string>> CollectShardStates();
  // After a resume: the versions the restored parameters correspond to.
  void SetVersions(std::vector<int64_t> versions) { versions_ = std::move(versions); }

  // Global progress for the learning-rate schedule: updates applied to shard 0 (as last heard),
  // in per-worker steps.
  int64_t ScheduleStep(int64_t local_step) const;
  int64_t pushes_sent() const { return pushes_; }
  int64_t pulls() const { return pulls_; }
  int64_t forced_pulls() const { return forced_pulls_; }  // by max_staleness

 private:
  Worker(const AsyncConfig& config, const Roles& roles, Communicator& comm, ParamArena& arena,
         std::unique_ptr<UpdateRule> local_rule);
  Status Push(Kind kind, std::span<const float> data, float lr);
  Status Pull();
  Status PushPending();
  Deadline NextDeadline() const;
  std::string Where() const;
  ShardRange Range(int shard) const { return ShardOf(arena_.total_size(), roles_.servers, shard); }

  const AsyncConfig config_;
  const Roles roles_;
  Communicator& comm_;
  ParamArena& arena_;
  std::unique_ptr<UpdateRule> local_rule_;  // frequency: epoch only
  std::vector<float> pending_;     // step: summed gradients; epoch: the values at the last pull
  int64_t pending_steps_ = 0;      // local steps not pushed yet
  float pending_lr_ = 0.0f;        // the newest lr of the pending steps
  int64_t steps_ = 0;              // local steps taken
  int64_t pushes_ = 0;             // pushes sent to each server
  std::vector<int64_t> versions_;  // per shard: the version this copy was pulled at
  int64_t newest_version_ = 0;     // shard 0's version as last heard
  bool must_pull_ = false;         // max_staleness exceeded
  int64_t pulls_ = 0, forced_pulls_ = 0;
};

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_WORKER_H_
