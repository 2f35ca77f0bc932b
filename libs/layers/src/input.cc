#include "reel/layers/input.h"

namespace reel::layers {

Result<const Feature*> CheckedFeature(const Batch& batch, const std::string& name, int64_t width,
                                      int64_t want_batch) {
  Result<const Feature*> found = batch.Find(name);
  if (!found.ok()) return InvalidArgumentError(found.status().message());
  const Feature& f = **found;
  if (f.values.rank() != 3 || f.values.dim(0) < 1 || f.values.dim(1) < 1)
    return InvalidArgumentError("feature '" + name + "' has shape " +
                                ShapeToString(f.values.shape()) + ", want [B, T, " +
                                std::to_string(width) + "]");
  if (f.values.dim(2) != width)
    return InvalidArgumentError("feature '" + name + "' has width " +
                                std::to_string(f.values.dim(2)) + ", want " +
                                std::to_string(width));
  const int64_t b_n = f.values.dim(0), t_n = f.values.dim(1);
  if (want_batch >= 0 && b_n != want_batch)
    return InvalidArgumentError("feature '" + name + "' has " + std::to_string(b_n) +
                                " videos, want " + std::to_string(want_batch));
  if (static_cast<int64_t>(f.lengths.size()) != b_n)
    return InvalidArgumentError("feature '" + name + "' has " + std::to_string(f.lengths.size()) +
                                " lengths for " + std::to_string(b_n) + " videos");
  for (int64_t b = 0; b < b_n; ++b) {
    const int32_t len = f.lengths[static_cast<size_t>(b)];
    if (len < 1 || len > t_n) {
      const std::string video = b < batch.size() ? "'" + batch.ids[static_cast<size_t>(b)] + "'"
                                                 : "#" + std::to_string(b);
      return InvalidArgumentError("feature '" + name + "' of video " + video + " has length " +
                                  std::to_string(len) + ", want 1.." + std::to_string(t_n));
    }
  }
  return &f;
}

Status RequireFinalizedArena(const ParamArena* arena, const std::string& model, const char* call) {
  if (arena != nullptr && arena->finalized()) return Status::Ok();
  return FailedPreconditionError("model '" + model + "': " + call +
                                 "() before the arena is finalized");
}

Status RequireBackwardInput(const std::string& model, bool trained, const Tensor& dlogits,
                            int64_t batch, int64_t classes) {
  if (!trained)
    return FailedPreconditionError("model '" + model +
                                   "': Backward() without a training Forward()");
  if (dlogits.rank() != 2 || dlogits.dim(0) != batch || dlogits.dim(1) != classes)
    return InvalidArgumentError("model '" + model + "': dlogits have shape " +
                                ShapeToString(dlogits.shape()) + ", want [" +
                                std::to_string(batch) + ", " + std::to_string(classes) + "]");
  return Status::Ok();
}

}  // namespace reel::layers
