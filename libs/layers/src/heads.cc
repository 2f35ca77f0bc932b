#include "reel/layers/heads.h"

#include "moe_kernels.h"

namespace reel::layers {
MoeHead::MoeHead(std::string name, int64_t in, int64_t classes, int64_t experts)
    : classes_(classes),
      experts_(experts),
      gates_(name + "/gates", in, classes * (experts + 1), false),
      experts_dense_(name + "/experts", in, classes * experts, true) {}

Status MoeHead::Declare(ParamArena& arena) {
  REEL_RETURN_IF_ERROR(gates_.Declare(arena));
  return experts_dense_.Declare(arena);
}

void MoeHead::Initialize(uint64_t seed) {
  gates_.Initialize(seed);
  experts_dense_.Initialize(seed);
}

// The element-wise part, per (example, class) item, is in moe_kernels.inc (log space, vectorised).
// Training keeps the logits' derivatives from the same pass (their exponentials and logarithms
// cost as much as the logits'), so Backward() only scales them.
void MoeHead::Forward(const float* x, int64_t batch, float* logits, Mode mode) {
  gate_act_.resize(static_cast<size_t>(batch * classes_ * (experts_ + 1)));
  expert_act_.resize(static_cast<size_t>(batch * classes_ * experts_));
  gates_.Forward(x, batch, gate_act_.data());
  experts_dense_.Forward(x, batch, expert_act_.data());
  const MoeItems items{gate_act_.data(), expert_act_.data(), batch * classes_, experts_};
  if (mode != Mode::kTrain) return MoeLogits(items, logits);
  unit_dgate_.resize(gate_act_.size());
  unit_dexpert_.resize(expert_act_.size());
  MoeLogits(items, logits, unit_dgate_.data(), unit_dexpert_.data());
}

void MoeHead::Backward(const float* x, const float* dlogits, int64_t batch, float* dx) {
  dgate_.resize(gate_act_.size());
  dexpert_.resize(expert_act_.size());
  MoeLogitGrads(batch * classes_, experts_, unit_dgate_.data(), unit_dexpert_.data(), dlogits,
                dgate_.data(), dexpert_.data());
  if (dx == nullptr) {
    // No input gradient to sum, so the experts (declared last, reduced first: reel/model.h's
    // GradientSink) go first and can be sent while the gates' product runs.
    experts_dense_.Backward(x, dexpert_.data(), batch, nullptr);
    experts_dense_.ReportGradients(sink_);
    gates_.Backward(x, dgate_.data(), batch, nullptr);
    gates_.ReportGradients(sink_);
    return;
  }
  gates_.Backward(x, dgate_.data(), batch, dx);
  experts_dense_.Backward(x, dexpert_.data(), batch, dx, /*accumulate_dx=*/true);
  experts_dense_.ReportGradients(sink_);
  gates_.ReportGradients(sink_);
}

Result<std::unique_ptr<Head>> MakeHead(const Options& options, std::string name, int64_t in,
                                       int64_t classes) {
  const std::string kind = options.GetString("head");
  if (kind == "logistic")
    return std::unique_ptr<Head>(new LogisticHead(std::move(name), in, classes));
  if (kind == "moe") {
    const int64_t experts = options.GetInt("experts");
    if (experts < 1)
      return InvalidArgumentError("option 'experts': " + std::to_string(experts) + " is not >= 1");
    return std::unique_ptr<Head>(new MoeHead(std::move(name), in, classes, experts));
  }
  return InvalidArgumentError("option 'head': unknown head '" + kind + "' (known: logistic, moe)");
}

}  // namespace reel::layers
