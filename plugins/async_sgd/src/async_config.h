// The async_sgd optimizer's options, checked before any training starts, and the roles and
// shard ranges they give a world of ranks.
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_ASYNC_CONFIG_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_ASYNC_CONFIG_H_

#include <cstdint>
#include <string>

#include "reel/optimizer.h"
#include "reel/options.h"
#include "reel/update_rule.h"

namespace reel::async_sgd {

struct AsyncConfig {
  UpdateRuleConfig rule;
  int servers = 1;         // the first `servers` ranks serve only (unless colocated)
  bool colocated = false;  // every rank trains and also serves one shard
  int64_t pull_every = 1;  // local steps between pulls of fresh weights
  int64_t push_every = 1;  // local steps whose gradients are accumulated into one push
  bool per_epoch = false;  // frequency: epoch — push the parameter delta once per epoch
  // Downpour's client (Dean et al. 2012): every step's gradient also updates the local copy (plain
  // sgd at the step's rate); a push carries the sum of the gradients since the last push.
  bool apply_locally = false;
  bool locking = true;  // false: Hogwild updates (sgd only)
  bool staleness_aware = false;
  int64_t max_staleness = 0;        // 0: no bound
  bool overlap = false;             // a step's push and pull run while the next step computes
  bool pipeline = true;             // a push+pull streams both ways at once (locking only; wire.h)
  int64_t pipeline_chunk = 262144;  // floats per chunk of a pipelined push+pull
  int64_t timeout_ms = 600000;
  // Shard updates between a server's own checkpoints (0: from the trainer's cadence, -1: never).
  int64_t server_checkpoint_every = 0;
};

OptionSchema AsyncOptions();

// InvalidArgument naming the option for a value out of range, and for a world with no worker
// (servers >= world size) or a combination that cannot work (locking: false with a stateful rule).
Result<AsyncConfig> ParseAsyncConfig(const Options& options, const OptimizerContext& ctx);

// Roles in a world of `world` ranks.
struct Roles {
  int servers = 1;  // ranks serving a shard: [0, servers), or every rank when colocated
  int first_worker = 1;
  int world = 2;
  bool colocated = false;
  int workers() const { return world - first_worker; }
  bool serves(int rank) const { return rank < servers; }
  bool trains(int rank) const { return rank >= first_worker; }
  int server_rank(int shard) const { return shard; }
};
Roles RolesFor(const AsyncConfig& c, int world);

// Contiguous shard ranges over `total` floats, sizes differing by at most one.
struct ShardRange {
  int64_t offset = 0, size = 0;
};
inline ShardRange ShardOf(int64_t total, int shards, int s) {
  const int64_t base = total / shards, extra = total % shards;
  return {s * base + std::min<int64_t>(s, extra), base + (s < extra ? 1 : 0)};
}

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_ASYNC_CONFIG_H_
