// Evaluation and prediction over a DataSource (see reel/core/evaluator.h).
#include "reel/core/evaluator.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "reel/core/loss.h"

namespace reel::core {

Result<Tensor> PredictBatch(std::span<Model* const> models, const Batch& batch,
                            int64_t num_classes) {
  if (models.empty()) return InvalidArgumentError("no model to predict with");
  Tensor sum({batch.size(), num_classes});
  for (size_t m = 0; m < models.size(); ++m) {
    REEL_ASSIGN_OR_RETURN(Tensor logits, models[m]->Forward(batch, Mode::kInfer));
    if (logits.rank() != 2 || logits.dim(0) != batch.size() || logits.dim(1) != num_classes)
      return InvalidArgumentError(
          "model " + std::to_string(m) + " returned logits " + ShapeToString(logits.shape()) +
          ", want [" + std::to_string(batch.size()) + ", " + std::to_string(num_classes) + "]");
    SigmoidInPlace(logits.values());
    auto out = sum.values();
    auto in = logits.values();
    for (size_t i = 0; i < out.size(); ++i) out[i] += in[i];
  }
  if (models.size() > 1)
    for (float& v : sum.values()) v /= static_cast<float>(models.size());
  return sum;
}

Result<std::vector<std::string>> GatherBytes(Communicator& comm, const std::string& mine,
                                             std::chrono::milliseconds timeout) {
  const int n = comm.size();
  if (n == 1) return std::vector<std::string>{mine};
  const Deadline deadline = DeadlineIn(timeout);
  uint64_t my_size = mine.size();
  std::vector<uint64_t> sizes(static_cast<size_t>(n));
  REEL_RETURN_IF_ERROR(comm.AllGather(std::as_bytes(std::span<const uint64_t>(&my_size, 1)),
                                      std::as_writable_bytes(std::span<uint64_t>(sizes)),
                                      deadline));
  const uint64_t max_size = std::max<uint64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
  std::string padded = mine;
  padded.resize(max_size, '\0');
  std::string all(max_size * static_cast<size_t>(n), '\0');
  REEL_RETURN_IF_ERROR(comm.AllGather(std::as_bytes(std::span<const char>(padded)),
                                      std::as_writable_bytes(std::span<char>(all)), deadline));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(all.substr(r * max_size, sizes[r]));
  return out;
}

Status BroadcastBytes(Communicator& comm, std::string& bytes, int root,
                      std::chrono::milliseconds timeout) {
  if (comm.size() == 1) return Status::Ok();
  const Deadline deadline = DeadlineIn(timeout);
  uint64_t size = bytes.size();
  REEL_RETURN_IF_ERROR(
      comm.Broadcast(std::as_writable_bytes(std::span<uint64_t>(&size, 1)), root, deadline));
  bytes.resize(size);
  return comm.Broadcast(std::as_writable_bytes(std::span<char>(bytes)), root, deadline);
}

Result<EvalMetrics> Evaluate(std::span<Model* const> models, DataSource& source,
                             int64_t num_classes, int top_k, Communicator* comm,
                             std::chrono::milliseconds timeout) {
  MetricsAccumulator acc(num_classes, top_k);
  while (true) {
    Result<Batch> batch = source.Next();
    if (!batch.ok()) {
      if (batch.status().code() == StatusCode::kOutOfRange) break;
      return batch.status();
    }
    REEL_ASSIGN_OR_RETURN(Tensor probs, PredictBatch(models, *batch, num_classes));
    REEL_RETURN_IF_ERROR(acc.AddBatch(probs, *batch));
  }
  if (comm != nullptr && comm->size() > 1) {
    REEL_ASSIGN_OR_RETURN(auto parts, GatherBytes(*comm, acc.Serialize(), timeout));
    MetricsAccumulator all(num_classes, top_k);
    for (size_t r = 0; r < parts.size(); ++r) {
      REEL_ASSIGN_OR_RETURN(MetricsAccumulator part, MetricsAccumulator::Deserialize(parts[r]));
      REEL_RETURN_IF_ERROR(all.Merge(part));
    }
    EvalMetrics merged = all.Compute();
    merged.videos_this_rank = acc.videos();
    return merged;
  }
  return acc.Compute();
}

Status Predict(std::span<Model* const> models, DataSource& source, int64_t num_classes, int top_k,
               const PredictionFn& emit) {
  const int64_t k = std::min<int64_t>(top_k, num_classes);
  std::vector<int32_t> order(static_cast<size_t>(num_classes));
  std::vector<std::pair<int32_t, float>> top;
  while (true) {
    Result<Batch> batch = source.Next();
    if (!batch.ok()) {
      if (batch.status().code() == StatusCode::kOutOfRange) return Status::Ok();
      return batch.status();
    }
    REEL_ASSIGN_OR_RETURN(Tensor probs, PredictBatch(models, *batch, num_classes));
    for (int64_t b = 0; b < batch->size(); ++b) {
      const float* p = probs.data() + b * num_classes;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t x, int32_t y) { return p[x] != p[y] ? p[x] > p[y] : x < y; });
      top.clear();
      for (int64_t i = 0; i < k; ++i) top.emplace_back(order[i], p[order[i]]);
      REEL_RETURN_IF_ERROR(emit(batch->ids[b], top));
    }
  }
}

}  // namespace reel::core
