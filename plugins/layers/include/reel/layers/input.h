// Checking a model's input feature before touching it, so every model reports a bad batch the
// same way: InvalidArgument naming the feature (and the video, for a bad length).
//
// Thread-safety: pure function; the returned pointer points into `batch`.
#ifndef REEL_LAYERS_INPUT_H_
#define REEL_LAYERS_INPUT_H_

#include <cstdint>
#include <string>

#include "reel/batch.h"

namespace reel::layers {

// The feature `name`, checked: present, [B, T, width] with B, T >= 1, one length per video, each
// in 1..T, and B == want_batch when want_batch >= 0.
Result<const Feature*> CheckedFeature(const Batch& batch, const std::string& name, int64_t width,
                                      int64_t want_batch = -1);

}  // namespace reel::layers

#endif  // REEL_LAYERS_INPUT_H_
