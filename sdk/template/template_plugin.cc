// A minimal reel plugin: one model that predicts each class from a learned bias alone. Copy this
// folder, rename, and replace the model with yours.
#include <memory>

#include "reel/plugin.h"

namespace {

class BiasModel final : public reel::Model {
 public:
  explicit BiasModel(int64_t classes) : classes_(classes) {}
  std::vector<std::string> InputFeatures() const override { return {}; }

  reel::Status DeclareParams(reel::ParamArena& arena) override {
    arena_ = &arena;
    REEL_ASSIGN_OR_RETURN(bias_, arena.Declare("bias", {classes_}));
    return reel::Status::Ok();
  }
  reel::Status Initialize(uint64_t /*seed*/) override { return reel::Status::Ok(); }  // zeros

  reel::Result<reel::Tensor> Forward(const reel::Batch& batch, reel::Mode) override {
    reel::Tensor logits({batch.size(), classes_});
    auto bias = arena_->values(bias_);
    for (int64_t b = 0; b < batch.size(); ++b)
      std::copy(bias.begin(), bias.end(), logits.data() + b * classes_);
    return logits;
  }

  reel::Status Backward(const reel::Batch& batch, const reel::Tensor& dlogits) override {
    auto grad = arena_->grads(bias_);
    std::fill(grad.begin(), grad.end(), 0.0f);
    for (int64_t b = 0; b < batch.size(); ++b)
      for (int64_t c = 0; c < classes_; ++c) grad[c] += dlogits.data()[b * classes_ + c];
    return reel::Status::Ok();
  }

 private:
  int64_t classes_;
  reel::ParamArena* arena_ = nullptr;
  reel::ParamArena::BlockId bias_ = 0;
};

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Model>({"template_model", "per-class bias only: a starting point", {}},
                            [](const reel::Options&, const reel::ModelContext& ctx)
                                -> reel::Result<std::unique_ptr<reel::Model>> {
                              return std::unique_ptr<reel::Model>(new BiasModel(ctx.num_classes));
                            });
}

}  // namespace

REEL_PLUGIN("template", "0.1.0", "Template plugin: copy me", Register)
