// How N ranks cut a flat buffer of floats into shards, for everything that shards one: the
// transport's ReduceScatter and AllGatherShards (reel/transport.h), the ring that runs them and
// the allreduce (reel/ring_allreduce.h), and the sync optimizer's sharded update
// (docs/distributed.md).
//
// Shard i is a contiguous range. The buffer is cut into blocks of kShardAlignFloats floats (the
// last block may be shorter) and the blocks into `ranks` runs whose lengths differ by at most one
// block, the longer runs first; so every shard starts at a multiple of kShardAlignFloats (a
// ParamArena's blocks are aligned so, reel/param_arena.h), rank 0's is the longest, and with
// fewer than `ranks` blocks the last ranks' shards are empty.
#ifndef REEL_SHARD_LAYOUT_H_
#define REEL_SHARD_LAYOUT_H_

#include <algorithm>
#include <cstddef>

namespace reel {

// Shards start at multiples of this many floats (64 bytes: one cache line, one AVX-512 vector).
inline constexpr size_t kShardAlignFloats = 16;

// Shard `index` of a buffer of `total` floats cut for `ranks` ranks (>= 1): [offset, offset +
// length).
struct ShardRange {
  size_t offset = 0;
  size_t length = 0;
};
inline ShardRange ShardOf(size_t total, size_t ranks, size_t index) {
  const size_t blocks = (total + kShardAlignFloats - 1) / kShardAlignFloats;
  auto start = [&](size_t i) {
    const size_t block = i * (blocks / ranks) + std::min(i, blocks % ranks);
    return std::min(total, block * kShardAlignFloats);
  };
  const size_t begin = start(index), end = start(index + 1);
  return {begin, end - begin};
}

}  // namespace reel

#endif  // REEL_SHARD_LAYOUT_H_
