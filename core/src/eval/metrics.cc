// YouTube-8M metrics (definitions: docs/metrics.md).
#include "reel/core/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace reel::core {
namespace {

constexpr char kMagic[8] = {'R', 'E', 'E', 'L', 'M', 'E', 'T', '1'};

// Higher score first; equal scores by class id so the order is deterministic.
bool ScoreBefore(float sa, int32_t ca, float sb, int32_t cb) {
  return sa != sb ? sa > sb : ca < cb;
}

template <typename T>
void Put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <typename T>
bool Take(std::string_view& in, T& v) {
  if (in.size() < sizeof v) return false;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return true;
}

}  // namespace

MetricsAccumulator::MetricsAccumulator(int64_t num_classes, int top_k)
    : num_classes_(num_classes),
      top_k_(top_k),
      positives_(static_cast<size_t>(num_classes), 0),
      is_label_(static_cast<size_t>(num_classes), 0) {}

Status MetricsAccumulator::AddVideo(std::span<const float> scores,
                                    std::span<const int32_t> labels) {
  if (static_cast<int64_t>(scores.size()) != num_classes_)
    return InvalidArgumentError("video has " + std::to_string(scores.size()) + " scores, want " +
                                std::to_string(num_classes_));
  // NaN orders with nothing, so no metric over it means anything (infinities rank as usual).
  for (size_t c = 0; c < scores.size(); ++c)
    if (std::isnan(scores[c]))
      return InvalidArgumentError("the score of class " + std::to_string(c) +
                                  " is NaN; metrics are not defined over NaN scores");
  for (int32_t c : labels)
    if (c < 0 || c >= num_classes_)
      return InvalidArgumentError("label " + std::to_string(c) + " outside [0, " +
                                  std::to_string(num_classes_) + ")");
  int64_t k_true = 0;
  for (int32_t c : labels) {
    if (!is_label_[c]) ++k_true;
    is_label_[c] = 1;
  }
  // Rank as many classes as any metric needs: top_k for GAP/mAP, k_true for PERR, 1 for Hit@1.
  const int64_t need = std::min<int64_t>(num_classes_, std::max<int64_t>({top_k_, k_true, 1}));
  order_.resize(static_cast<size_t>(num_classes_));
  std::iota(order_.begin(), order_.end(), 0);
  auto before = [&](int32_t a, int32_t b) { return ScoreBefore(scores[a], a, scores[b], b); };
  std::partial_sort(order_.begin(), order_.begin() + need, order_.end(), before);

  ++videos_;
  if (num_classes_ > 0 && is_label_[order_[0]]) ++hits_;
  if (k_true > 0) {
    int64_t found = 0;
    for (int64_t i = 0; i < k_true; ++i) found += is_label_[order_[i]];
    perr_sum_ += static_cast<double>(found) / static_cast<double>(k_true);
  }
  const int64_t k = std::min<int64_t>(top_k_, num_classes_);
  for (int64_t i = 0; i < k; ++i) {
    int32_t c = order_[i];
    pairs_.push_back({scores[c], c, is_label_[c]});
  }
  for (int32_t c : labels) {
    if (is_label_[c]) ++positives_[c];
    is_label_[c] = 0;  // also resets the scratch for the next video
  }
  return Status::Ok();
}

Status MetricsAccumulator::AddBatch(const Tensor& scores, const Batch& batch) {
  if (scores.rank() != 2 || scores.dim(0) != batch.size() || scores.dim(1) != num_classes_)
    return InvalidArgumentError("scores have shape " + ShapeToString(scores.shape()) + ", want [" +
                                std::to_string(batch.size()) + ", " + std::to_string(num_classes_) +
                                "]");
  for (int64_t b = 0; b < batch.size(); ++b) {
    std::span<const float> row(scores.data() + b * num_classes_, static_cast<size_t>(num_classes_));
    Status s = AddVideo(row, batch.labels(b));
    if (!s.ok()) return s.WithContext("video '" + batch.ids[b] + "'");
  }
  return Status::Ok();
}

Status MetricsAccumulator::Merge(const MetricsAccumulator& other) {
  if (other.num_classes_ != num_classes_ || other.top_k_ != top_k_)
    return InvalidArgumentError("cannot merge metrics over " + std::to_string(other.num_classes_) +
                                " classes / top " + std::to_string(other.top_k_) + " into " +
                                std::to_string(num_classes_) + " classes / top " +
                                std::to_string(top_k_));
  videos_ += other.videos_;
  hits_ += other.hits_;
  perr_sum_ += other.perr_sum_;
  for (size_t c = 0; c < positives_.size(); ++c) positives_[c] += other.positives_[c];
  pairs_.insert(pairs_.end(), other.pairs_.begin(), other.pairs_.end());
  return Status::Ok();
}

std::string MetricsAccumulator::Serialize() const {
  std::string out(kMagic, sizeof kMagic);
  Put(out, num_classes_);
  Put(out, top_k_);
  Put(out, videos_);
  Put(out, hits_);
  Put(out, perr_sum_);
  for (int64_t p : positives_) Put(out, p);
  Put(out, static_cast<uint64_t>(pairs_.size()));
  for (const Pair& p : pairs_) {
    Put(out, p.score);
    Put(out, p.cls);
    Put(out, p.is_true);
  }
  return out;
}

Result<MetricsAccumulator> MetricsAccumulator::Deserialize(std::string_view in) {
  auto bad = [](const std::string& what) {
    return DataLossError("serialized metrics are corrupt: " + what);
  };
  if (in.size() < sizeof kMagic || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    return bad("bad magic");
  in.remove_prefix(sizeof kMagic);
  int64_t classes;
  int top_k;
  if (!Take(in, classes) || !Take(in, top_k) || classes < 0 || top_k < 0 ||
      static_cast<uint64_t>(classes) > in.size() / sizeof(int64_t))
    return bad("bad header");
  MetricsAccumulator acc(classes, top_k);
  if (!Take(in, acc.videos_) || !Take(in, acc.hits_) || !Take(in, acc.perr_sum_))
    return bad("truncated counters");
  for (int64_t& p : acc.positives_)
    if (!Take(in, p)) return bad("truncated positives");
  uint64_t n;
  constexpr size_t kPairBytes = sizeof(float) + sizeof(int32_t) + sizeof(uint8_t);
  if (!Take(in, n) || n != in.size() / kPairBytes || in.size() % kPairBytes != 0)
    return bad("pair count does not match the payload");
  acc.pairs_.resize(n);
  for (Pair& p : acc.pairs_) {
    Take(in, p.score);
    Take(in, p.cls);
    Take(in, p.is_true);
    if (p.cls < 0 || p.cls >= classes) return bad("class id out of range");
  }
  return acc;
}

EvalMetrics MetricsAccumulator::Compute() const {
  EvalMetrics m;
  m.videos = videos_;
  m.videos_this_rank = videos_;
  m.top_k = top_k_;
  if (videos_ == 0) return m;
  m.hit_at_1 = static_cast<double>(hits_) / static_cast<double>(videos_);
  m.perr = perr_sum_ / static_cast<double>(videos_);

  std::vector<uint32_t> idx(pairs_.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
    return ScoreBefore(pairs_[a].score, pairs_[a].cls, pairs_[b].score, pairs_[b].cls);
  });
  const int64_t total_positives = std::accumulate(positives_.begin(), positives_.end(), int64_t{0});
  // One pass serves GAP (all pairs) and every class's AP (that class's pairs only).
  std::vector<int64_t> seen(static_cast<size_t>(num_classes_), 0), hits(seen.size(), 0);
  std::vector<double> class_ap(seen.size(), 0.0);
  int64_t all_seen = 0, all_hits = 0;
  double gap_sum = 0.0;
  for (uint32_t i : idx) {
    const Pair& p = pairs_[i];
    ++all_seen;
    ++seen[p.cls];
    if (p.is_true) {
      ++all_hits;
      ++hits[p.cls];
      gap_sum += static_cast<double>(all_hits) / static_cast<double>(all_seen);
      class_ap[p.cls] += static_cast<double>(hits[p.cls]) / static_cast<double>(seen[p.cls]);
    }
  }
  m.gap = total_positives > 0 ? gap_sum / static_cast<double>(total_positives) : 0.0;
  double ap_sum = 0.0;
  int64_t classes_with_positives = 0;
  for (size_t c = 0; c < positives_.size(); ++c) {
    if (positives_[c] == 0) continue;
    ++classes_with_positives;
    ap_sum += class_ap[c] / static_cast<double>(positives_[c]);
  }
  m.map = classes_with_positives > 0 ? ap_sum / static_cast<double>(classes_with_positives) : 0.0;
  return m;
}

}  // namespace reel::core
