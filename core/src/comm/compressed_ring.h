// The compressed ring allreduce: the chunked ring of reel/ring_allreduce.h (the one schedule),
// run over a communicator's point-to-point calls with every message carrying its chunk as 16-bit
// values (wire16.h), for the sync optimizer's `compression` option (docs/distributed.md,
// "Compression on the wire").
//
// Reduce-scatter: each rank encodes the chunk it sends; the receiver widens it to fp32 and adds it
// into its own fp32 data. All-gather: the owner of a finished chunk encodes it once, replaces its
// own values with what the encoding decodes to, and the encoded bytes travel on unchanged, so
// every rank ends with the same bits. Part::kReduceScatter runs the first half alone (each rank's
// own shard, reel/shard_layout.h, left summed in fp32 and not rounded).
//
// Error feedback (when given a residual the size of the data): every rounding happens on one rank
// (the chunk it sends in the reduce-scatter, its own contribution or a partial sum; the finished
// chunk it owns in the all-gather), and that rank adds what the rounding took away (x - Q(x)) to
// its residual at those elements. The caller adds the residual into its next gradient and zeroes
// it; the sums of all steps then differ from the true sums only by what the residuals hold at the
// end (plus fp32's own rounding), instead of by every step's rounding.
//
// The ranks must call it with the same count, format and part (the sync optimizer checks its
// options agree at Setup); it moves data on the user tag given, which nothing else may use on the
// communicator meanwhile. After a failure (a deadline, a lost peer) the object refuses later calls
// with FailedPrecondition naming it: messages of the failed call may still be on their way.
//
// Core-internal. Thread-safety: one calling thread at a time (it runs a sending thread of its
// own during each step of the ring).
#ifndef REEL_CORE_SRC_COMM_COMPRESSED_RING_H_
#define REEL_CORE_SRC_COMM_COMPRESSED_RING_H_

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "comm/wire16.h"
#include "reel/ring_allreduce.h"
#include "reel/status.h"
#include "reel/transport.h"

namespace reel::core {

// The user tag the sync optimizer's compressed exchange travels on (reel/transport.h: below
// kCollectiveTagBase; the trainer's reports use 900 and 901).
constexpr int kCompressedRingTag = 910;

// See the file comment. Keeps its message buffers between calls, so steps do not allocate.
class CompressedRing {
 public:
  CompressedRing(WireFormat format, int tag) : format_(format), tag_(tag) {}

  // Sums `data` over the ranks of `comm` (Part::kAllReduce or Part::kReduceScatter); adds every
  // rounding error this rank makes to `residual` (empty: none kept; else data.size() floats).
  Status Run(Communicator& comm, std::span<float> data, ring::Part part, Deadline deadline,
             std::span<float> residual = {});

  // Bytes of float data a chunk holds before encoding (the schedule's chunk_bytes).
  static constexpr size_t kChunkBytes = size_t{256} << 10;

 private:
  Status RunRing(Communicator& comm, std::span<float> data, ring::Part part, Deadline deadline,
                 std::span<float> residual);
  // Encodes `chunk` into `wire`; adds its rounding error to `residual` (if not empty); and when
  // `keep`, replaces `chunk` with the decoded values.
  void EncodeSent(std::span<float> chunk, std::span<std::byte> wire, std::span<float> residual,
                  bool keep);

  const WireFormat format_;
  const int tag_;
  std::string failed_;  // the first failure, if any
  std::vector<std::byte> send_, recv_;
  std::vector<float> decoded_;  // a sent chunk as its receiver sees it (error feedback)
};

}  // namespace reel::core

#endif  // REEL_CORE_SRC_COMM_COMPRESSED_RING_H_
