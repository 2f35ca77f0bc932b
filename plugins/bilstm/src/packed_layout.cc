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

void PackedLayout::ToTbd(const float* src, int64_t src_ld, int64_t dim, bool reversed,
                         float* dst) const {
  const int64_t b_n = batch();
  std::memset(dst, 0, static_cast<size_t>(steps() * b_n * dim) * sizeof(float));
  const size_t bytes = static_cast<size_t>(dim) * sizeof(float);
  for (int64_t b = 0; b < b_n; ++b) {
    const int64_t len = lengths_[static_cast<size_t>(b)];
    for (int64_t t = 0; t < len; ++t)
      std::memcpy(dst + ((reversed ? len - 1 - t : t) * b_n + b) * dim, src + Row(t, b) * src_ld,
                  bytes);
  }
}

void PackedLayout::FromTbd(const float* src, int64_t dim, bool reversed, float* dst,
                           int64_t dst_ld) const {
  const int64_t b_n = batch();
  const size_t bytes = static_cast<size_t>(dim) * sizeof(float);
  for (int64_t b = 0; b < b_n; ++b) {
    const int64_t len = lengths_[static_cast<size_t>(b)];
    for (int64_t t = 0; t < len; ++t)
      std::memcpy(dst + Row(t, b) * dst_ld, src + ((reversed ? len - 1 - t : t) * b_n + b) * dim,
                  bytes);
  }
}

}  // namespace reel::bilstm
