// The moe plugin: the video-level baselines `logistic` and `moe`.
#include "reel/plugin.h"

#include "video_level_model.h"

namespace {

reel::ModelFactory Factory(std::string kind) {
  return [kind](const reel::Options& o,
                const reel::ModelContext& c) -> reel::Result<std::unique_ptr<reel::Model>> {
    REEL_ASSIGN_OR_RETURN(auto model, reel::moe::VideoLevelModel::Create(kind, o, c));
    return std::unique_ptr<reel::Model>(std::move(model));
  };
}

reel::Status Register(reel::Registrar& r) {
  REEL_RETURN_IF_ERROR(
      r.Add<reel::Model>({"logistic", "video-level logistic regression on mean_rgb + mean_audio",
                          reel::moe::VideoLevelOptions(false)},
                         Factory("logistic")));
  return r.Add<reel::Model>({"moe", "video-level mixture of experts on mean_rgb + mean_audio",
                             reel::moe::VideoLevelOptions(true)},
                            Factory("moe"));
}

}  // namespace

REEL_PLUGIN("moe", "0.1.0", "Video-level YouTube-8M baselines: logistic and mixture of experts",
            Register)
