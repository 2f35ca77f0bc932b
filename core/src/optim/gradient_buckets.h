// Gradient buckets: the "sync" optimizer's reduction overlapped with backward
// (docs/distributed.md, "Overlapping the exchange with backward").
//
// The arena's gradient is cut into buckets of whole blocks, from the last block backwards (a
// model declares its head last and reports it first), each at least `bucket_bytes` unless it is
// the last; every rank derives the same layout from the same arena. As the model reports blocks
// finished (GradientSink), each bucket whose blocks are all finished is handed, strictly in
// bucket order, to one communication thread that allreduces (sums) it in place. Finish() hands
// over what is left and waits for all of it. The order of the collectives is therefore the same
// on every rank whatever the model reported (a rank that reported nothing, such as one without
// data, sends every bucket in Finish()), and the sums equal those of the same buckets reduced
// one after another after backward, to the last bit.
//
// Thread-safety: GradientsReady and Finish on the thread that trains; the communicator is used
// only by the communication thread between the first hand-over and the end of Finish() (the
// Communicator contract: one collective caller at a time).
#ifndef REEL_CORE_SRC_OPTIM_GRADIENT_BUCKETS_H_
#define REEL_CORE_SRC_OPTIM_GRADIENT_BUCKETS_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "reel/model.h"
#include "reel/param_arena.h"
#include "reel/transport.h"

namespace reel::core {

// An arena range [begin, end) in floats, padding included.
struct GradientRange {
  int64_t begin = 0, end = 0;
};

// The buckets of `arena` for `bucket_bytes` (> 0), in the order they are reduced: the highest
// offsets first; together they cover [0, total_size()) without overlap.
std::vector<GradientRange> BucketLayout(const ParamArena& arena, int64_t bucket_bytes);

// How a bucket is summed over the ranks, on the communication thread: the communicator's
// AllReduce unless the owner gives another (the sync optimizer's compressed ring).
using BucketReducer = std::function<Status(std::span<float> bucket, Deadline deadline)>;

// See the file comment.
class GradientBuckets final : public GradientSink {
 public:
  // `timeout_ms`: each bucket's deadline, counted from its start (0: none). `reducer`: see
  // BucketReducer (empty: the communicator's AllReduce).
  GradientBuckets(ParamArena& arena, Communicator& comm, int64_t bucket_bytes, int64_t timeout_ms,
                  BucketReducer reducer = nullptr);
  // Waits for the buckets handed over (each to its end or its deadline; none after a failure),
  // so ranks that handed over the same buckets leave their collectives in step.
  ~GradientBuckets() override;
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  void GradientsReady(int64_t offset, int64_t size) override;

  // Hands over every bucket not started, waits for all, and readies the next step. Returns the
  // first failure (its bucket's range named); the buckets after a failure are not sent.
  Status Finish();

  const std::vector<GradientRange>& layout() const { return layout_; }
  // Buckets handed to the communication thread before Finish() in the last step (for tests and
  // the docs' claim that a reporting model overlaps).
  int started_early() const { return started_early_; }

 private:
  void HandOver(int count);
  void Run();

  ParamArena& arena_;
  Communicator& comm_;
  const int64_t timeout_ms_;
  const BucketReducer reducer_;
  const std::vector<GradientRange> layout_;
  std::vector<int> bucket_of_block_;    // per arena block
  std::vector<int> missing_;            // per bucket: blocks not reported in this step
  std::vector<char> reported_;          // per block, this step
  std::vector<int64_t> block_offsets_;  // ascending, for finding reported blocks
  int next_ = 0;                        // buckets handed over in this step (trainer's thread)
  int started_early_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  int handed_ = 0;  // guarded by mu_: buckets the thread may run
  int done_ = 0;    // guarded by mu_: buckets it finished (or skipped after a failure)
  bool stop_ = false;
  Status failure_;  // guarded by mu_: this step's first
  std::thread thread_;
};

}  // namespace reel::core

#endif  // REEL_CORE_SRC_OPTIM_GRADIENT_BUCKETS_H_
