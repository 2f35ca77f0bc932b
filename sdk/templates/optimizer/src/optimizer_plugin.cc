// An optimizer plugin: synchronous data-parallel SGD with momentum. Every step averages the
// ranks' gradients with the communicator's AllReduce, then v = μ·v + g, w -= lr·v. Copy it and
// replace Step; the rules it follows are those of reel/optimizer.h:
//   - Setup binds the arena and communicator (both outlive the optimizer); the communicator's
//     collectives always work (the host adds ring algorithms where a transport lacks them);
//   - every rank calls the same collectives in the same order;
//   - SaveState/RestoreState carry everything Step depends on (here the velocity) in a format
//     that says what it is, and refuse what is not theirs.
// Setup, Step, SaveState and RestoreState are all it must implement; an optimizer that gives
// ranks roles (parameter servers) also implements reel/rank_roles.h.
#include <cstring>
#include <memory>

#include "reel/plugin.h"

namespace {

constexpr std::string_view kStateMagic = "template_momentum/1:";

class MomentumOptimizer final : public reel::Optimizer {
 public:
  explicit MomentumOptimizer(float momentum) : momentum_(momentum) {}

  reel::Status Setup(reel::ParamArena& arena, reel::Communicator& comm) override {
    arena_ = &arena;
    comm_ = &comm;
    velocity_.assign(arena.values().size(), 0.0f);
    // Every rank starts from rank 0's parameters.
    auto w = arena.values();
    return comm.Broadcast(std::as_writable_bytes(w), 0, reel::NoDeadline());
  }

  reel::Status Step(float lr) override {
    auto g = arena_->grads();
    REEL_RETURN_IF_ERROR(comm_->AllReduce(g, reel::ReduceOp::kSum, reel::NoDeadline()));
    const float scale = 1.0f / static_cast<float>(comm_->size());
    auto w = arena_->values();
    for (size_t i = 0; i < w.size(); ++i) {
      velocity_[i] = momentum_ * velocity_[i] + g[i] * scale;
      w[i] -= lr * velocity_[i];
    }
    return reel::Status::Ok();
  }

  reel::Result<std::string> SaveState() override {
    std::string state(kStateMagic);
    state.append(reinterpret_cast<const char*>(velocity_.data()), velocity_.size() * sizeof(float));
    return state;
  }

  reel::Status RestoreState(std::string_view state) override {
    if (state.substr(0, kStateMagic.size()) != kStateMagic ||
        state.size() != kStateMagic.size() + velocity_.size() * sizeof(float))
      return reel::InvalidArgumentError("not a template_momentum state for " +
                                        std::to_string(velocity_.size()) + " parameters");
    std::memcpy(velocity_.data(), state.data() + kStateMagic.size(),
                velocity_.size() * sizeof(float));
    return reel::Status::Ok();
  }

 private:
  float momentum_;
  reel::ParamArena* arena_ = nullptr;
  reel::Communicator* comm_ = nullptr;
  std::vector<float> velocity_;
};

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Optimizer>(
      {"template_momentum",
       "synchronous SGD with momentum",
       {reel::FloatOption("momentum", 0.9, "velocity kept from one step to the next, in [0, 1)")}},
      [](const reel::Options& o,
         const reel::OptimizerContext&) -> reel::Result<std::unique_ptr<reel::Optimizer>> {
        const double momentum = o.GetFloat("momentum");
        if (momentum < 0 || momentum >= 1)
          return reel::InvalidArgumentError("option 'momentum' must lie in [0, 1)");
        return std::unique_ptr<reel::Optimizer>(
            new MomentumOptimizer(static_cast<float>(momentum)));
      });
}

}  // namespace

REEL_PLUGIN("template_optimizer", "0.1.0", "Template optimizer plugin: copy me", Register)
