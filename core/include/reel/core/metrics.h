// YouTube-8M evaluation metrics: GAP@k (k = 20), Hit@1, PERR and mAP, exactly as the reference
// evaluation defines them (docs/metrics.md), accumulated over a stream of videos.
//
// Memory is bounded per video: the accumulator keeps only each video's top-k (score, class, is
// true) triples, per-class positive counts and two running sums, never the full score matrix.
// Accumulators of different ranks (or of different evaluation shards) merge exactly: Serialize()
// one, Deserialize() it elsewhere and Merge() — the result equals one accumulator fed every video.
//
// Thread-safety: none; one thread per accumulator.
#ifndef REEL_CORE_METRICS_H_
#define REEL_CORE_METRICS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reel/batch.h"
#include "reel/status.h"
#include "reel/tensor.h"

namespace reel::core {

// YouTube-8M's evaluation metrics over every video seen; `reel eval` prints them.
struct EvalMetrics {
  double gap = 0.0;       // global average precision over pooled top-k predictions
  double hit_at_1 = 0.0;  // fraction of videos whose best class is a true label
  double perr = 0.0;      // precision at equal recall rate, averaged over videos
  double map = 0.0;       // mean over classes with positives of the per-class top-k AP
  int64_t videos = 0;
  int top_k = 0;  // the k of GAP@k and of mAP's per-class lists
  // Of `videos`, those this rank scored when Evaluate merged several ranks' (else all of them).
  int64_t videos_this_rank = 0;
};

// Collects predictions and labels batch by batch, then computes EvalMetrics over all of them.
class MetricsAccumulator {
 public:
  explicit MetricsAccumulator(int64_t num_classes, int top_k = 20);

  // One video: `scores` has num_classes entries (probabilities, or any monotone transform);
  // `labels` are its true classes (duplicates are counted once). InvalidArgument when the sizes
  // or a label are out of range, or a score is NaN (naming the first such class).
  Status AddVideo(std::span<const float> scores, std::span<const int32_t> labels);
  // Every video of a batch; `scores` is [B, num_classes]. An error names the video.
  Status AddBatch(const Tensor& scores, const Batch& batch);

  // Adds another accumulator's videos. InvalidArgument if classes or k differ.
  Status Merge(const MetricsAccumulator& other);
  std::string Serialize() const;
  // DataLoss when `bytes` is not a serialized accumulator.
  static Result<MetricsAccumulator> Deserialize(std::string_view bytes);

  EvalMetrics Compute() const;

  int64_t videos() const { return videos_; }
  int64_t num_classes() const { return num_classes_; }
  int top_k() const { return top_k_; }

 private:
  struct Pair {
    float score;
    int32_t cls;
    uint8_t is_true;
  };
  int64_t num_classes_;
  int top_k_;
  int64_t videos_ = 0;
  int64_t hits_ = 0;
  double perr_sum_ = 0.0;
  std::vector<int64_t> positives_;  // per class
  std::vector<Pair> pairs_;         // every video's top-k
  std::vector<int32_t> order_;      // scratch: class indices
  std::vector<uint8_t> is_label_;   // scratch: per class flag
};

}  // namespace reel::core

#endif  // REEL_CORE_METRICS_H_
