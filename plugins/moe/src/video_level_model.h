// The moe plugin's video-level models, the YouTube-8M starter code's baselines: `logistic`
// (one dense layer) and `moe` (mixture of experts) on the video-level features concatenated,
// by default mean_rgb (1024) + mean_audio (128) = 1152 inputs.
//
// Video-level features arrive as sequences of length 1; a longer feature (e.g. frame-level rgb)
// is averaged over each video's valid frames, which for length 1 is the value itself.
//
// Parameters: "head/w", "head/b" (logistic) or "head/gates/w", "head/experts/{w,b}" (moe).
// Ownership: keeps a pointer to the arena given to DeclareParams(), which must outlive it.
// Thread-safety: one thread per instance; instances are independent.
#ifndef REEL_PLUGINS_MOE_SRC_VIDEO_LEVEL_MODEL_H_
#define REEL_PLUGINS_MOE_SRC_VIDEO_LEVEL_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "reel/layers/heads.h"
#include "reel/model.h"
#include "reel/options.h"

namespace reel::moe {

// Schema of `logistic` (with_experts=false) and `moe` (with_experts=true).
OptionSchema VideoLevelOptions(bool with_experts);

class VideoLevelModel final : public Model {
 public:
  // `kind` is "logistic" or "moe"; `options` were parsed with VideoLevelOptions(kind == "moe").
  // Errors: InvalidArgument naming the option at fault.
  static Result<std::unique_ptr<VideoLevelModel>> Create(const std::string& kind,
                                                         const Options& options,
                                                         const ModelContext& context);

  std::vector<std::string> InputFeatures() const override { return features_; }
  Status DeclareParams(ParamArena& arena) override;
  Status Initialize(uint64_t seed) override;
  Result<Tensor> Forward(const Batch& batch, Mode mode) override;
  Status Backward(const Batch& batch, const Tensor& dlogits) override;
  // The head reports its blocks, the experts' before the gates' (the whole model is its head).
  void SetGradientSink(GradientSink* sink) override;

 private:
  VideoLevelModel() = default;

  std::string kind_;
  std::vector<std::string> features_;
  std::vector<int64_t> widths_;
  int64_t input_width_ = 0, classes_ = 0;
  std::unique_ptr<layers::Head> head_;
  ParamArena* arena_ = nullptr;
  bool trained_ = false;
  int64_t batch_ = 0;
  std::vector<float> x_;  // [B, input_width_], the head's input kept for Backward()
};

}  // namespace reel::moe

#endif  // REEL_PLUGINS_MOE_SRC_VIDEO_LEVEL_MODEL_H_
