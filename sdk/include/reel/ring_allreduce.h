// The schedule of a chunked ring allreduce (reduce-scatter, then allgather), for every ring that
// runs it: the core's ring over any backend's point-to-point calls, and a transport's native
// AllReduce that drives the ring itself (tcp). Ranks of one group must cut and order the chunks
// alike, so they share this one definition.
//
// The `count` elements form `ranks` segments, the shards of reel/shard_layout.h (ring segment s
// is shard s - 1, so reduce-scatter leaves rank r's own shard complete on rank r), each cut into
// chunks() chunks of about `chunk_bytes` (the same number on every rank). A rank handles units
// u = step * chunks() + chunk in order: steps 0 .. ranks-2 reduce-scatter (it sends a chunk to its
// right neighbour and adds the one from its left into its own data), steps ranks-1 .. 2 ranks-3
// allgather (it sends a finished chunk on and stores the one it receives). Sending unit u needs
// unit u - chunks() received and reduced first (for the first allgather step: the last
// reduce-scatter step's chunk, now complete).
//
// Either half alone is a collective of its own (Communicator::ReduceScatter, AllGatherShards):
// a Part runs units [begin(), end()) only. Each element is summed in the same order whichever
// runs, so a reduce-scatter followed by an allgather gives the allreduce's bits.
#ifndef REEL_RING_ALLREDUCE_H_
#define REEL_RING_ALLREDUCE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "reel/shard_layout.h"
#include "reel/transport.h"

namespace reel::ring {

// Splits `total` items into `parts` contiguous segments whose sizes differ by at most one.
struct Segments {
  size_t total, parts;
  size_t offset(size_t i) const { return i * (total / parts) + std::min(i, total % parts); }
  size_t length(size_t i) const { return total / parts + (i < total % parts ? 1 : 0); }
};

// dst[i] = op(dst[i], src[i]) for i < n. (Compile with a vectorizing cost model: GCC 12's -O2
// leaves these loops scalar.)
inline void Reduce(float* __restrict dst, const float* __restrict src, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      for (size_t i = 0; i < n; ++i) dst[i] += src[i];
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      break;
  }
}

// Which units a ring runs: the whole allreduce, or one of its halves.
enum class Part { kAllReduce, kReduceScatter, kAllGather };

// Which part of the data each unit sends and receives, for rank `rank` of `ranks` (>= 2).
class Schedule {
 public:
  Schedule(size_t count, int ranks, int rank, size_t chunk_bytes, Part part = Part::kAllReduce)
      : n_(static_cast<size_t>(ranks)),
        r_(static_cast<size_t>(rank)),
        count_(count),
        chunks_(std::max<size_t>(
            1, (ShardOf(count, n_, 0).length * sizeof(float) + chunk_bytes - 1) / chunk_bytes)),
        units_(static_cast<int64_t>(2 * (n_ - 1) * chunks_)),
        begin_(part == Part::kAllGather ? units_ / 2 : 0),
        end_(part == Part::kReduceScatter ? units_ / 2 : units_) {}

  size_t chunks() const { return chunks_; }  // per segment, the same on every rank
  int64_t units() const { return units_; }   // of the whole allreduce
  // The units of the Part: [begin(), end()).
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  // The largest chunk, in elements (a scratch slot for received reduce-scatter chunks).
  size_t max_chunk() const { return (ShardOf(count_, n_, 0).length + chunks_ - 1) / chunks_; }
  // Unit u belongs to the reduce-scatter (its received chunk is reduced into the data).
  bool Reducing(int64_t u) const { return static_cast<size_t>(u) < (n_ - 1) * chunks_; }
  // The first allgather unit that receives into the part that unit `u` sent from.
  int64_t SentFromSamePlace(int64_t u) const {
    return u - static_cast<int64_t>((n_ - 1) * chunks_);
  }

  // The part of `data` that unit `u` sends (`sent`) or receives into.
  template <typename T>
  std::span<T> Chunk(std::span<T> data, int64_t u, bool sent) const {
    const size_t step = static_cast<size_t>(u) / chunks_, chunk = static_cast<size_t>(u) % chunks_;
    // Reduce-scatter step s sends segment r - s and receives r - s - 1; after n - 1 steps
    // segment r + 1 is complete here. Allgather step s sends segment r + 1 - s, receives r - s.
    size_t segment;
    if (Reducing(u)) {
      segment = (r_ + 2 * n_ - step - (sent ? 0 : 1)) % n_;
    } else {
      const size_t s = step - (n_ - 1);
      segment = (r_ + 2 * n_ - s + (sent ? 1 : 0)) % n_;
    }
    const ShardRange shard = ShardOf(count_, n_, (segment + n_ - 1) % n_);
    const Segments pieces{shard.length, chunks_};
    return data.subspan(shard.offset + pieces.offset(chunk), pieces.length(chunk));
  }

 private:
  size_t n_, r_, count_;
  size_t chunks_;
  int64_t units_, begin_, end_;
};

}  // namespace reel::ring

#endif  // REEL_RING_ALLREDUCE_H_
