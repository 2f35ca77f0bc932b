// cuDNN-style packed layout of a batch of variable-length sequences: the sequences sorted by
// length (longest first, stable), then time-major with only the running sequences at each step.
// Step t holds batch_sizes[t] rows (the sequences longer than t, in sorted order) starting at row
// offsets[t]; there is no padding row, so no work is spent on padding.
//
// A forward-in-time pass visits the steps 0..T-1 and its batch shrinks; a backward-in-time pass
// visits T-1..0, its batch grows, and each sequence joins (with zero state) at its own last frame.
// In both, the sequences carrying state from the previous step are the first rows of the step.
//
// Thread-safety: immutable after construction.
#ifndef REEL_PLUGINS_BILSTM_SRC_PACKED_LAYOUT_H_
#define REEL_PLUGINS_BILSTM_SRC_PACKED_LAYOUT_H_

#include <cstdint>
#include <span>
#include <vector>

#include "reel/layers/sequence.h"

namespace reel::bilstm {

class PackedLayout {
 public:
  PackedLayout() = default;
  // REQUIRES: every length >= 1.
  explicit PackedLayout(std::span<const int32_t> lengths);

  int64_t batch() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t steps() const { return static_cast<int64_t>(batch_sizes_.size()); }
  int64_t rows() const { return rows_; }  // the valid frames, sum of the lengths
  int64_t batch_size(int64_t t) const { return batch_sizes_[static_cast<size_t>(t)]; }
  int64_t offset(int64_t t) const { return offsets_[static_cast<size_t>(t)]; }
  // Packed row of video b's frame t (REQUIRES t < length of b).
  int64_t Row(int64_t t, int64_t b) const { return offset(t) + position_[static_cast<size_t>(b)]; }
  const std::vector<int32_t>& lengths() const { return lengths_; }

  // Packs frames t < length of src btd [B, t_in, dim] into dst [rows, dim].
  void Pack(const float* src, int64_t t_in, int64_t dim, float* dst) const;
  // The packed row of frame t of video b counted in a pass's own time order: frame t, or frame
  // length-1-t with reversed=true (a backward pass), for the pooling helpers (layers/sequence.h).
  // REQUIRES: this layout outlives the function.
  layers::FrameRow Frames(bool reversed) const;

 private:
  std::vector<int32_t> lengths_;
  std::vector<int32_t> position_;  // video -> sorted position
  std::vector<int64_t> batch_sizes_, offsets_;
  int64_t rows_ = 0;
};

}  // namespace reel::bilstm

#endif  // REEL_PLUGINS_BILSTM_SRC_PACKED_LAYOUT_H_
