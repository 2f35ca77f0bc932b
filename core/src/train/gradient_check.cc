// The non-finite check of a gradient reduced during backward (see gradient_check.h).
#include "train/gradient_check.h"

#include <algorithm>
#include <string>

#include "train/nonfinite.h"

namespace reel::core {

CheckedGradientSink::CheckedGradientSink(const ParamArena& arena, GradientSink& next)
    : arena_(arena), next_(next), checked_(arena.blocks().size(), 0) {}

void CheckedGradientSink::Check(size_t block) {
  if (checked_[block]) return;
  checked_[block] = 1;
  const ParamArena::Block& b = arena_.blocks()[block];
  const std::span<const float> g =
      arena_.grads().subspan(static_cast<size_t>(b.offset), static_cast<size_t>(b.size));
  if (!first_bad_.empty() || AllFinite(g)) return;
  first_bad_ = FirstNonFiniteIn(b, arena_.grads());
}

void CheckedGradientSink::GradientsReady(int64_t offset, int64_t size) {
  const auto& blocks = arena_.blocks();
  for (size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i].offset >= offset && blocks[i].offset + blocks[i].size <= offset + size) Check(i);
  next_.GradientsReady(offset, size);
}

std::string CheckedGradientSink::EndBackward() {
  for (size_t i = 0; i < checked_.size(); ++i) Check(i);
  std::fill(checked_.begin(), checked_.end(), 0);
  std::string out;
  out.swap(first_bad_);
  return out;
}

}  // namespace reel::core
