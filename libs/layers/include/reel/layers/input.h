// The checks every model makes before it runs, so all models report a mistake the same way: its
// input feature (InvalidArgument naming the feature, and the video for a bad length) and the
// order of calls (FailedPrecondition before the parameter arena is finalized).
//
// Thread-safety: pure functions; the returned pointer points into `batch`.
#ifndef REEL_LAYERS_INPUT_H_
#define REEL_LAYERS_INPUT_H_

#include <cstdint>
#include <string>

#include "reel/batch.h"
#include "reel/param_arena.h"
#include "reel/tensor.h"

namespace reel::layers {

// The feature `name`, checked: present, [B, T, width] with B, T >= 1, one length per video, each
// in 1..T, and B == want_batch when want_batch >= 0.
Result<const Feature*> CheckedFeature(const Batch& batch, const std::string& name, int64_t width,
                                      int64_t want_batch = -1);

// OK once `arena` (the one the model declared into; null if none yet) is finalized; otherwise
// FailedPrecondition "model '<model>': <call>() before the arena is finalized".
Status RequireFinalizedArena(const ParamArena* arena, const std::string& model, const char* call);

// OK when Backward() may run: the last Forward() was a training one (`trained`) and `dlogits` is
// [batch, classes]. Otherwise FailedPrecondition or InvalidArgument naming the model.
Status RequireBackwardInput(const std::string& model, bool trained, const Tensor& dlogits,
                            int64_t batch, int64_t classes);

}  // namespace reel::layers

#endif  // REEL_LAYERS_INPUT_H_
