// The sync optimizer's sharded update (ZeRO stage 1, docs/distributed.md): each rank reduces,
// clips and updates only its shard of the arena (reel/shard_layout.h), its update rule holding
// moments for that shard alone, and the ranks then gather the parameters. Checkpoints hold the
// whole state, as an unsharded run writes it, so any run resumes from any other.
//
// Core-internal. Thread-safety: one thread per rank; every function that takes a Communicator is
// a collective (every rank calls it, in the same order).
#ifndef REEL_CORE_SRC_OPTIM_SHARDED_UPDATE_H_
#define REEL_CORE_SRC_OPTIM_SHARDED_UPDATE_H_

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "reel/shard_layout.h"
#include "reel/status.h"
#include "reel/transport.h"
#include "reel/update_rule.h"

namespace reel::core {

// This rank's shard of `total` floats.
ShardRange ShardOfRank(size_t total, const Communicator& comm);

// How the gradient is reduce-scattered (summed, this rank's shard complete): the communicator's
// ReduceScatter unless the caller gives another (the sync optimizer's compressed ring).
using ShardReducer = std::function<Status(std::span<float> grads, Deadline deadline)>;

// One step: ReduceScatter (sum) of `grads` (or `reducer`, when given), this rank's shard scaled by
// 1 / size(), clipped by the global norm when clip_norm > 0 (the shards' squared norms gathered and
// summed in rank order, on every rank alike), `rule` applied to this shard of `values`, then
// AllGatherShards of `values`. Returns the global norm before clipping. Failures name the phase
// that failed.
Result<double> ShardedStep(Communicator& comm, UpdateRule& rule, std::span<float> values,
                           std::span<float> grads, float lr, double clip_norm, Deadline deadline,
                           const ShardReducer& reducer = nullptr);

// Every rank: the whole rule state (UpdateRule::SaveState's format, moments over all `total`
// floats) gathered from every rank's shard-sized `rule`; the same bytes an unsharded rule that
// took the same steps would save. `config` is the rule's (for how many moment vectors it keeps).
Result<std::string> GatherRuleState(Communicator& comm, const UpdateRule& rule,
                                    const UpdateRuleConfig& config, size_t total,
                                    Deadline deadline);

// A whole rule state's part for `shard` (moment vectors that are empty stay empty).
// InvalidArgument if a moment vector is not empty and does not cover the shard.
Result<std::string> RuleStateOfShard(std::string_view whole, ShardRange shard);

}  // namespace reel::core

#endif  // REEL_CORE_SRC_OPTIM_SHARDED_UPDATE_H_
