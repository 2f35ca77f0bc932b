// Evaluation and prediction: run one or more models over a DataSource's epoch, turn logits into
// probabilities (sigmoid), and either accumulate the YouTube-8M metrics or hand each video's top
// classes to a callback. Several models form an ensemble: their probabilities are averaged.
//
// Ranks: with a communicator of size > 1 every rank evaluates its shard and the accumulators are
// merged with AllGather, so every rank returns the metrics of the whole evaluation set.
// Thread-safety: one thread per call; the models and the source are used exclusively meanwhile.
#ifndef REEL_CORE_EVALUATOR_H_
#define REEL_CORE_EVALUATOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "reel/core/metrics.h"
#include "reel/core/timeouts.h"
#include "reel/data_source.h"
#include "reel/model.h"
#include "reel/status.h"
#include "reel/transport.h"

namespace reel::core {

// Averaged sigmoid probabilities of `models` for `batch`, [B, num_classes].
Result<Tensor> PredictBatch(std::span<Model* const> models, const Batch& batch,
                            int64_t num_classes);

// Reads `source` until OutOfRange (the caller starts the epoch) and returns the metrics.
// `comm` may be null (one rank); merging with the other ranks waits at most `timeout`.
Result<EvalMetrics> Evaluate(std::span<Model* const> models, DataSource& source,
                             int64_t num_classes, int top_k, Communicator* comm,
                             std::chrono::milliseconds timeout = kDefaultTimeout);

// For every video of the epoch, calls `emit(id, top)` with its `top_k` (class, probability) pairs,
// best first.
using PredictionFn =
    std::function<Status(const std::string& id, const std::vector<std::pair<int32_t, float>>& top)>;
Status Predict(std::span<Model* const> models, DataSource& source, int64_t num_classes, int top_k,
               const PredictionFn& emit);

// Concatenation of every rank's `mine`, in rank order (sizes may differ between ranks); waits at
// most `timeout` for the other ranks.
Result<std::vector<std::string>> GatherBytes(Communicator& comm, const std::string& mine,
                                             std::chrono::milliseconds timeout = kDefaultTimeout);

// Afterwards every rank's `bytes` equals the root's (sizes may differ before); waits at most
// `timeout` for the other ranks.
Status BroadcastBytes(Communicator& comm, std::string& bytes, int root,
                      std::chrono::milliseconds timeout = kDefaultTimeout);

}  // namespace reel::core

#endif  // REEL_CORE_EVALUATOR_H_
