// The "sync" optimizer: synchronous data parallelism. Every step allreduces (sums) the arena's
// gradients, in buckets started while backward goes on (gradient_buckets.h, `bucket_mb`) or as
// one fused message after it (`bucket_mb` 0), divides them by the world size, clips the average by
// its global norm when the trainer asked (AcceptGradientClipping) and applies the configured update
// rule (reel/update_rule.h) to the values; every rank then holds the same parameters.
// Setup() checks that all ranks declared the same number of parameters and broadcasts rank 0's
// initial values, so all ranks start identical whatever their seeds.
// With zero_stage 1 the ranks shard the update instead (sharded_update.h, docs/distributed.md).
// With `compression` the gradient crosses the wire in 16 bits (docs/distributed.md, "Compression
// on the wire").
//
// Exposed here (core-internal) so tests can build it without the registry; hosts get it as the
// registered optimizer "sync". Thread-safety: one thread per instance (the Optimizer contract).
#ifndef REEL_CORE_SRC_OPTIM_SYNC_OPTIMIZER_H_
#define REEL_CORE_SRC_OPTIM_SYNC_OPTIMIZER_H_

#include <memory>

#include "reel/optimizer.h"
#include "reel/options.h"

namespace reel::core {

// The update-rule options plus `zero_stage` (0 or 1), `bucket_mb` (see the file comment),
// `timeout_ms` (deadline of each collective; 0 waits forever), `compression` (none, bf16, fp16:
// the gradient summed on the compressed ring, comm/compressed_ring.h) and `error_feedback`.
OptionSchema SyncOptimizerOptions();

// Errors: InvalidArgument for an unknown update rule, a negative timeout, a zero_stage other
// than 0 and 1, a bucket_mb outside [0, 2048] or a compression other than none, bf16, fp16.
Result<std::unique_ptr<Optimizer>> MakeSyncOptimizer(const Options& options);

}  // namespace reel::core

#endif  // REEL_CORE_SRC_OPTIM_SYNC_OPTIMIZER_H_
