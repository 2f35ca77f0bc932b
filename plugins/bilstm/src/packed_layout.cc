#include "packed_layout.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace reel::bilstm {

PackedLayout::PackedLayout(std::span<const int32_t> lengths)
    : lengths_(lengths.begin(), lengths.end()) {
  std::vector<int32_t> order(lengths_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return lengths_[a] > lengths_[b]; });
  position_.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) position_[static_cast<size_t>(order[i])] = i;
  const int64_t steps = lengths_.empty() ? 0 : lengths_[static_cast<size_t>(order[0])];
  batch_sizes_.assign(static_cast<size_t>(steps), 0);
  offsets_.assign(static_cast<size_t>(steps), 0);
  for (int32_t len : lengths_)
    for (int64_t t = 0; t < len; ++t) ++batch_sizes_[static_cast<size_t>(t)];
  for (int64_t t = 0; t < steps; ++t) {
    offsets_[static_cast<size_t>(t)] = rows_;
    rows_ += batch_sizes_[static_cast<size_t>(t)];
  }
}

// On the OpenMP threads, a video each (their lengths differ, hence dynamic): the copy runs before
// both directions can start, and on one thread the other one waited for it (0.7-1.4 ms of the audio
// step).
void PackedLayout::Pack(const float* src, int64_t t_in, int64_t dim, float* dst) const {
  const size_t bytes = static_cast<size_t>(dim) * sizeof(float);
#pragma omp parallel for schedule(dynamic, 1) if (rows_ * dim >= (int64_t{1} << 16))
  for (int64_t b = 0; b < batch(); ++b)
    for (int64_t t = 0; t < lengths_[static_cast<size_t>(b)]; ++t)
      std::memcpy(dst + Row(t, b) * dim, src + (b * t_in + t) * dim, bytes);
}

layers::FrameRow PackedLayout::Frames(bool reversed) const {
  return [this, reversed](int64_t t, int64_t b) {
    return Row(reversed ? lengths_[static_cast<size_t>(b)] - 1 - t : t, b);
  };
}

}  // namespace reel::bilstm
