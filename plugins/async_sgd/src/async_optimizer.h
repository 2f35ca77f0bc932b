// The "async_sgd" optimizer: asynchronous SGD with parameter servers over any Communicator.
//
// Roles (async_config.h): the first `servers` ranks serve a contiguous, balanced shard of the
// ParamArena each and do not train; the rest are workers (worker.h). With `colocated: true` every
// rank trains and also serves one shard from a thread of its own. Servers (shard_server.h) apply
// each push with the configured update rule as it arrives.
//
// Life: Setup() broadcasts rank 0's initial parameters to every rank, so servers and workers
// start from the same values. A server-only rank then runs Serve() until every worker has called
// Finish(); a colocated rank serves from the first call after Setup() (its peers may push before
// it trains) until Finish(). The lead worker's SaveState() takes a cut of every shard from its
// server (values, rule state and version of one instant, Worker::CollectCut) and puts the values
// into its arena, where the trainer's checkpoint takes the parameters from; RestoreState() hands
// each server its shard and each worker the versions.
//
// Servers' own checkpoints (shard_checkpoints.h): offered the run's checkpoint directory
// (RankRoles::OfferCheckpoints), each server writes its shard every server_checkpoint_every
// updates. On a resume every rank lists the complete sets; if the newest is newer than the
// checkpoint the trainer restored (its shards' highest version), the servers take their shards from
// it and the workers pull them before their first step. The ranks check they saw the same set. A
// resume that found no trainer checkpoint but a complete set is refused
// (RefuseShardsWithoutCheckpoint).
//
// State format: "RASG" | uint32 version (1) | uint32 shards | per shard: uint64 length + the
// shard's state (int64 version, then the update rule's state, reel/update_rule.h).
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_ASYNC_OPTIMIZER_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_ASYNC_OPTIMIZER_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "async_config.h"
#include "reel/optimizer.h"
#include "shard_server.h"
#include "worker.h"

namespace reel::async_sgd {

class AsyncOptimizer final : public Optimizer, public RankRoles {
 public:
  // Errors: InvalidArgument for bad options or a world without workers (ParseAsyncConfig).
  static Result<std::unique_ptr<AsyncOptimizer>> Create(const Options& options,
                                                        const OptimizerContext& ctx);
  ~AsyncOptimizer() override;

  Status Setup(ParamArena& arena, Communicator& comm) override;
  Status Step(float lr) override;
  // The lead worker: a cut of every shard from its server, and the arena brought to that cut.
  Result<std::string> SaveState() override;
  Status RestoreState(std::string_view state) override;
  Status EndEpoch(int64_t epoch) override;
  Status Finish() override;
  RankRoles* rank_roles() override { return this; }

  // RankRoles.
  bool IsServerOnly() const override;
  bool HasServerOnlyRanks() const override { return !config_.colocated; }
  // Colocated too: its ranks serve from threads, so none waits for another's step.
  bool TrainsIndependently() const override { return true; }
  Status Serve() override;
  void OfferCheckpoints(const OptimizerCheckpoints& checkpoints) override {
    offered_ = checkpoints;
  }
  int64_t ScheduleStep(int64_t local_step) const override;
  Status Refresh() override;
  void NoteStep(int64_t step, int64_t examples) override {
    if (worker_) worker_->NoteStep(step, examples);
  }
  // From the servers' tallies (Worker::AppliedWorkOf); nullopt on a rank that does not train.
  Result<std::optional<AppliedWork>> AppliedWorkOf(int rank) override;
  // From the first server (Worker::ExamplesApplied); nullopt on a rank that does not train.
  Result<std::optional<int64_t>> ExamplesApplied() override;
  // From the first server (Worker::LeadAfter); nullopt when colocated (a lost rank also served a
  // shard, so the run cannot go on) and on a rank that does not train.
  Result<std::optional<int>> LeadAfter(int lost) override;

  // For tests: this rank's server (null on a worker-only rank) and worker (null on a server).
  const ShardServer* server() const { return server_.get(); }
  const Worker* worker() const { return worker_.get(); }
  int shards() const { return roles_.servers; }

 private:
  AsyncOptimizer(AsyncConfig config, OptimizerContext ctx)
      : config_(std::move(config)), ctx_(ctx), roles_(RolesFor(config_, ctx.world_size)) {}
  // FailedPrecondition before Setup(); on the first call after it, RefuseShardsWithoutCheckpoint.
  Status Ready(const char* call);
  // Colocated: starts this rank's server thread on first use.
  void StartColocatedServer();
  Status JoinColocatedServer();
  static std::string Encode(const std::vector<std::string>& shards);
  // Updates between a server's own checkpoints; 0: none.
  int64_t ServerCheckpointEvery() const;
  // The newest complete set of the servers' own checkpoints, of any number of servers, agreed
  // on by every rank (a collective); version -1 if there is none.
  Result<ShardSet> NewestShardSet();
  // That set if it is newer than `versions` (the restored state's); version -1 if it is not.
  Result<ShardSet> NewerShardSet(const std::vector<int64_t>& versions);
  // This server's shard of the set (values and state), cut anew if the set has another number
  // of shards than this run has servers.
  Result<ShardSnapshot> ReadShardOf(const ShardSet& set);
  // A resume that restored no state but finds a complete shard set: FailedPrecondition.
  Status RefuseShardsWithoutCheckpoint();
  // The per-shard parts of a state, checked against this run (format above); a state of another
  // number of servers is cut anew for this run's (shard_states.h), once the arena is known.
  Result<std::vector<std::string>> SplitState(std::string_view state) const;

  const AsyncConfig config_;
  const OptimizerContext ctx_;
  const Roles roles_;
  Communicator* comm_ = nullptr;              // not owned
  ParamArena* arena_ = nullptr;               // not owned
  std::optional<std::string> pending_state_;  // RestoreState() before Setup()
  std::optional<OptimizerCheckpoints> offered_;
  std::shared_ptr<ShardCheckpoints> shard_checkpoints_;  // null without a checkpoint directory
  std::unique_ptr<ShardServer> server_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<std::thread> colocated_;
  Status colocated_status_;
  bool restored_ = false;           // RestoreState() applied a state
  bool first_use_checked_ = false;  // Ready() ran the first-use check
  bool finished_ = false;
  bool served_ = false;
};

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_ASYNC_OPTIMIZER_H_
