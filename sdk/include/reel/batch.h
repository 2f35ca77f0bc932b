// Batch: what a DataSource yields and a Model consumes.
//
// For B videos: their ids; per feature name ("rgb", "audio", "mean_rgb", ...) a dense float tensor
// [B, T, D] zero-padded past each video's valid length, plus the lengths [B]; and the labels in
// CSR form (label_offsets [B+1], label_ids). Video-level features are sequences of length 1.
//
// Thread-safety: a value type; no internal locking.
#ifndef REEL_BATCH_H_
#define REEL_BATCH_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "reel/status.h"
#include "reel/tensor.h"

namespace reel {

// One feature of a batch: its values for every video, padded to the longest.
struct Feature {
  Tensor values;                 // [B, T, D]; frames at t >= lengths[b] are zero
  std::vector<int32_t> lengths;  // [B]; 1 <= lengths[b] <= T
};

// B videos: ids, features by name and labels (see the file comment for the layout).
struct Batch {
  std::vector<std::string> ids;             // [B]
  std::map<std::string, Feature> features;  // by feature name
  std::vector<int64_t> label_offsets{
      0};                          // [B + 1]; labels of video b are [offsets[b], offsets[b+1])
  std::vector<int32_t> label_ids;  // class ids, each in [0, num_classes)

  int64_t size() const { return static_cast<int64_t>(ids.size()); }

  std::span<const int32_t> labels(int64_t b) const {
    return {label_ids.data() + label_offsets[static_cast<size_t>(b)],
            static_cast<size_t>(label_offsets[static_cast<size_t>(b) + 1] -
                                label_offsets[static_cast<size_t>(b)])};
  }

  // The feature `name`, or NotFound naming it and the features the batch has.
  Result<const Feature*> Find(const std::string& name) const {
    auto it = features.find(name);
    if (it != features.end()) return &it->second;
    std::string have;
    for (const auto& [k, v] : features) have += (have.empty() ? "" : ", ") + k;
    return NotFoundError("batch has no feature '" + name +
                         "' (it has: " + (have.empty() ? "none" : have) + ")");
  }
};

// Checks the invariants above; returns InvalidArgument naming the feature or video at fault.
inline Status ValidateBatch(const Batch& batch, int64_t num_classes) {
  const int64_t n = batch.size();
  if (static_cast<int64_t>(batch.label_offsets.size()) != n + 1 || batch.label_offsets[0] != 0 ||
      batch.label_offsets.back() != static_cast<int64_t>(batch.label_ids.size()))
    return InvalidArgumentError("batch label offsets do not match its " + std::to_string(n) +
                                " videos");
  for (int64_t b = 0; b < n; ++b) {
    if (batch.label_offsets[b + 1] < batch.label_offsets[b])
      return InvalidArgumentError("batch label offsets decrease at video '" + batch.ids[b] + "'");
    for (int32_t c : batch.labels(b))
      if (c < 0 || c >= num_classes)
        return InvalidArgumentError("video '" + batch.ids[b] + "' has label " + std::to_string(c) +
                                    " outside [0, " + std::to_string(num_classes) + ")");
  }
  for (const auto& [name, f] : batch.features) {
    if (f.values.rank() != 3 || f.values.dim(0) != n)
      return InvalidArgumentError("feature '" + name + "' has shape " +
                                  ShapeToString(f.values.shape()) + ", want [" + std::to_string(n) +
                                  ", T, D]");
    if (static_cast<int64_t>(f.lengths.size()) != n)
      return InvalidArgumentError("feature '" + name + "' has " + std::to_string(f.lengths.size()) +
                                  " lengths for " + std::to_string(n) + " videos");
    for (int64_t b = 0; b < n; ++b)
      if (f.lengths[b] < 1 || f.lengths[b] > f.values.dim(1))
        return InvalidArgumentError("feature '" + name + "' of video '" + batch.ids[b] +
                                    "' has length " + std::to_string(f.lengths[b]) + ", want 1.." +
                                    std::to_string(f.values.dim(1)));
  }
  return Status::Ok();
}

}  // namespace reel

#endif  // REEL_BATCH_H_
