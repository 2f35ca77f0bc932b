// A model plugin: logistic regression on one video-level feature, logits = W·x + b. Copy it and
// replace the arithmetic with your model; the rules it follows are those of reel/model.h:
//   - parameters live in the host's ParamArena (declared in DeclareParams, filled in Initialize,
//     deterministic under the seed), so optimizers and checkpoints handle every model alike;
//   - Forward returns logits [B, num_classes]; the loss is the core's;
//   - Backward overwrites arena.grads() with dLoss/dparam;
//   - errors are Status values naming the feature; nothing throws across the plugin boundary.
#include <memory>
#include <random>

#include "reel/plugin.h"

namespace {

class LinearModel final : public reel::Model {
 public:
  LinearModel(std::string feature, int64_t width, int64_t classes)
      : feature_(std::move(feature)), width_(width), classes_(classes) {}

  std::vector<std::string> InputFeatures() const override { return {feature_}; }

  reel::Status DeclareParams(reel::ParamArena& arena) override {
    arena_ = &arena;
    REEL_ASSIGN_OR_RETURN(weights_, arena.Declare("weights", {classes_, width_}));
    REEL_ASSIGN_OR_RETURN(bias_, arena.Declare("bias", {classes_}));
    return reel::Status::Ok();
  }

  reel::Status Initialize(uint64_t seed) override {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.01f);
    for (float& w : arena_->values(weights_)) w = normal(rng);
    return reel::Status::Ok();  // the bias stays zero
  }

  reel::Result<reel::Tensor> Forward(const reel::Batch& batch, reel::Mode) override {
    REEL_ASSIGN_OR_RETURN(const reel::Feature* x, batch.Find(feature_));
    if (x->values.dim(2) != width_)
      return reel::InvalidArgumentError("feature '" + feature_ + "' has width " +
                                        std::to_string(x->values.dim(2)) + ", want " +
                                        std::to_string(width_));
    auto w = arena_->values(weights_);
    auto b = arena_->values(bias_);
    reel::Tensor logits({batch.size(), classes_});
    for (int64_t v = 0; v < batch.size(); ++v) {
      const float* in = x->values.data() + v * x->values.dim(1) * width_;  // first frame
      for (int64_t c = 0; c < classes_; ++c) {
        float sum = b[c];
        for (int64_t d = 0; d < width_; ++d) sum += w[c * width_ + d] * in[d];
        logits.data()[v * classes_ + c] = sum;
      }
    }
    return logits;
  }

  reel::Status Backward(const reel::Batch& batch, const reel::Tensor& dlogits) override {
    REEL_ASSIGN_OR_RETURN(const reel::Feature* x, batch.Find(feature_));
    auto dw = arena_->grads(weights_);
    auto db = arena_->grads(bias_);
    std::fill(dw.begin(), dw.end(), 0.0f);
    std::fill(db.begin(), db.end(), 0.0f);
    for (int64_t v = 0; v < batch.size(); ++v) {
      const float* in = x->values.data() + v * x->values.dim(1) * width_;
      for (int64_t c = 0; c < classes_; ++c) {
        const float g = dlogits.data()[v * classes_ + c];
        db[c] += g;
        for (int64_t d = 0; d < width_; ++d) dw[c * width_ + d] += g * in[d];
      }
    }
    return reel::Status::Ok();
  }

 private:
  std::string feature_;
  int64_t width_, classes_;
  reel::ParamArena* arena_ = nullptr;
  reel::ParamArena::BlockId weights_ = 0, bias_ = 0;
};

reel::Status Register(reel::Registrar& r) {
  reel::OptionSchema options = {
      reel::StringOption("feature", "mean_rgb", "video-level input feature"),
      reel::IntOption("width", 1024, "values per video of the feature")};
  return r.Add<reel::Model>(
      {"template_linear", "logistic regression on one video-level feature", options},
      [](const reel::Options& o,
         const reel::ModelContext& ctx) -> reel::Result<std::unique_ptr<reel::Model>> {
        if (o.GetInt("width") < 1) return reel::InvalidArgumentError("option 'width' must be >= 1");
        return std::unique_ptr<reel::Model>(
            new LinearModel(o.GetString("feature"), o.GetInt("width"), ctx.num_classes));
      });
}

}  // namespace

REEL_PLUGIN("template_model", "0.1.0", "Template model plugin: copy me", Register)
