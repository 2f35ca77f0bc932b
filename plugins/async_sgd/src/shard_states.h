// The servers' state in a trainer checkpoint, split again for another number of servers. Each
// shard's part is its version then its update rule's state (UpdateRule::SaveState: the step
// count and 0-2 moment vectors, one float per parameter of the shard). The shards are contiguous
// ranges of the arena (ShardOf), so the moments of all shards laid end to end are the moments
// of the whole arena, which the new ranges cut anew. Every shard applies every push, so their
// versions and step counts differ only by the pushes in flight when the state was collected:
// each new shard takes the largest (the staleness and the learning rate then count from the
// newest update; Adam's bias correction is already close to 1 after a few hundred steps).
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_STATES_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_STATES_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reel/status.h"

namespace reel::async_sgd {

// The parts of `shards` states (parts.size()) over an arena of `total` floats, re-cut into
// `servers` parts. DataLoss when a part is malformed or its moments do not fit its range.
Result<std::vector<std::string>> ReshardStates(std::span<const std::string_view> parts,
                                               int64_t total, int servers);

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_STATES_H_
