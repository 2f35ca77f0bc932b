// Model conformance (reel/model.h): parameters declared and initialised deterministically,
// logits of the right shape, repeatable inference, gradients that match finite differences of the
// core's loss, Backward overwriting rather than accumulating, and a clear error for a batch that
// lacks an input feature. Batches are synthetic: the features the model names, at the widths
// given (or YouTube-8M's), with random values and labels.
#include <cmath>
#include <random>

#include "checks.h"
#include "reel/core/loss.h"

namespace reel::core::conformance_internal {
namespace {

constexpr int64_t kBatch = 3, kFrames = 4;

struct Instance {
  Owned<Model> model;
  std::unique_ptr<ParamArena> arena = std::make_unique<ParamArena>();
};

Result<Instance> Make(const Registry& registry, const ComponentEntry& entry,
                      const ConformanceOptions& options, uint64_t seed) {
  Instance m;
  ModelContext ctx;
  ctx.num_classes = options.num_classes;
  ctx.threads = 1;
  REEL_ASSIGN_OR_RETURN(m.model, registry.CreateModel(entry.info.name, options.options, ctx));
  REEL_RETURN_IF_ERROR(m.model->DeclareParams(*m.arena).WithContext("DeclareParams"));
  m.arena->Finalize();
  REEL_RETURN_IF_ERROR(m.model->Initialize(seed).WithContext("Initialize"));
  return m;
}

Result<std::vector<float>> Logits(Model& model, const Batch& batch, Mode mode) {
  REEL_ASSIGN_OR_RETURN(Tensor t, model.Forward(batch, mode));
  return std::vector<float>(t.data(), t.data() + t.size());
}

Result<double> Loss(Model& model, const Batch& batch) {
  REEL_ASSIGN_OR_RETURN(Tensor logits, model.Forward(batch, Mode::kTrain));
  REEL_ASSIGN_OR_RETURN(LossResult loss, SigmoidCrossEntropy(logits, batch));
  return loss.loss;
}

// Backward once; the gradients it wrote.
Result<std::vector<float>> Gradients(Instance& m, const Batch& batch) {
  REEL_ASSIGN_OR_RETURN(Tensor logits, m.model->Forward(batch, Mode::kTrain));
  REEL_ASSIGN_OR_RETURN(LossResult loss, SigmoidCrossEntropy(logits, batch));
  REEL_RETURN_IF_ERROR(m.model->Backward(batch, loss.dlogits).WithContext("Backward"));
  auto g = m.arena->grads();
  return std::vector<float>(g.begin(), g.end());
}

Status Shape(Instance& m, const Batch& batch, int64_t classes) {
  REEL_ASSIGN_OR_RETURN(Tensor logits, m.model->Forward(batch, Mode::kInfer));
  if (logits.rank() != 2 || logits.dim(0) != kBatch || logits.dim(1) != classes)
    return InvalidArgumentError("logits have shape " + ShapeToString(logits.shape()) + ", want [" +
                                std::to_string(kBatch) + ", " + std::to_string(classes) + "]");
  for (int64_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits.data()[i]))
      return InvalidArgumentError("logit " + std::to_string(i) + " is not finite");
  return Status::Ok();
}

Status Deterministic(const Registry& registry, const ComponentEntry& entry,
                     const ConformanceOptions& options, Instance& m, const Batch& batch) {
  REEL_ASSIGN_OR_RETURN(Instance twin, Make(registry, entry, options, 7));
  auto a = m.arena->values(), b = twin.arena->values();
  if (!std::equal(a.begin(), a.end(), b.begin(), b.end()))
    return InvalidArgumentError("two instances initialised with seed 7 hold different parameters");
  REEL_ASSIGN_OR_RETURN(std::vector<float> first, Logits(*m.model, batch, Mode::kInfer));
  REEL_ASSIGN_OR_RETURN(std::vector<float> second, Logits(*twin.model, batch, Mode::kInfer));
  REEL_ASSIGN_OR_RETURN(std::vector<float> again, Logits(*m.model, batch, Mode::kInfer));
  if (first != second || first != again)
    return InvalidArgumentError("kInfer logits differ between calls or between twin instances");
  return Status::Ok();
}

// The directional derivative along a random unit direction d, (L(w + εd) - L(w - εd)) / 2ε,
// against the gradient's g·d. Float32 arithmetic: agreement within 5% (or 2e-3 absolute).
Status GradientsMatchFiniteDifferences(Instance& m, const Batch& batch) {
  REEL_ASSIGN_OR_RETURN(std::vector<float> grad, Gradients(m, batch));
  auto w = m.arena->values();
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  std::vector<double> d(w.size());
  double norm = 0, directional = 0;
  for (double& x : d) {
    x = normal(rng);
    norm += x * x;
  }
  norm = std::sqrt(norm);
  for (size_t i = 0; i < d.size(); ++i) directional += grad[i] * (d[i] /= norm);
  const std::vector<float> saved(w.begin(), w.end());
  double loss[2];
  const double eps = 1e-2;
  for (int side = 0; side < 2; ++side) {
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = static_cast<float>(saved[i] + (side == 0 ? eps : -eps) * d[i]);
    REEL_ASSIGN_OR_RETURN(loss[side], Loss(*m.model, batch));
  }
  std::copy(saved.begin(), saved.end(), w.begin());
  const double numeric = (loss[0] - loss[1]) / (2 * eps);
  if (std::abs(numeric - directional) > std::max(2e-3, 0.05 * std::abs(numeric)))
    return InvalidArgumentError(
        "along a random direction the loss changes at " + std::to_string(numeric) +
        " (finite differences), the gradients say " + std::to_string(directional));
  return Status::Ok();
}

Status BackwardOverwrites(Instance& m, const Batch& batch) {
  REEL_ASSIGN_OR_RETURN(std::vector<float> first, Gradients(m, batch));
  REEL_ASSIGN_OR_RETURN(std::vector<float> second, Gradients(m, batch));
  double nonzero = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    nonzero += std::abs(first[i]);
    if (std::abs(first[i] - second[i]) > 1e-5f * (1 + std::abs(first[i])))
      return InvalidArgumentError("gradient " + std::to_string(i) + " is " +
                                  std::to_string(first[i]) + " after one Backward and " +
                                  std::to_string(second[i]) +
                                  " after a second: Backward must overwrite, not add");
  }
  return nonzero > 0 ? Status::Ok() : InvalidArgumentError("every gradient is zero");
}

Status NamesAMissingFeature(Instance& m, Batch batch) {
  if (batch.features.empty()) return Status::Ok();
  const std::string name = batch.features.begin()->first;
  batch.features.erase(batch.features.begin());
  Result<Tensor> out = m.model->Forward(batch, Mode::kInfer);
  if (out.ok()) return InvalidArgumentError("Forward accepted a batch without '" + name + "'");
  if (out.status().message().find(name) == std::string::npos)
    return InvalidArgumentError("the error does not name '" + name +
                                "': " + out.status().ToString());
  return Status::Ok();
}

}  // namespace

void CheckModel(const Registry& registry, const ComponentEntry& entry,
                const ConformanceOptions& options, const CheckSink& sink) {
  Result<Instance> made = Make(registry, entry, options, 7);
  if (!Report(sink, "creates, declares its parameters and initialises", made.status())) return;
  Instance& m = *made;
  Report(sink, "declares at least one parameter",
         m.arena->blocks().empty() ? InvalidArgumentError("the arena is empty") : Status::Ok());
  Result<Batch> batch = SyntheticBatch(*m.model, options, kBatch, kFrames);
  if (!Report(sink, "its input features are known", batch.status())) return;
  if (!Report(sink, "logits are [B, num_classes] and finite",
              Shape(m, *batch, options.num_classes)))
    return;
  Report(sink, "same seed, same parameters; inference repeats",
         Deterministic(registry, entry, options, m, *batch));
  if (!m.arena->blocks().empty()) {
    Report(sink, "gradients match finite differences of the loss",
           GradientsMatchFiniteDifferences(m, *batch));
    Report(sink, "Backward overwrites the gradients", BackwardOverwrites(m, *batch));
  }
  Report(sink, "a batch without an input feature is an error naming it",
         NamesAMissingFeature(m, *batch));
}

}  // namespace reel::core::conformance_internal

namespace reel::core {

Result<Batch> SyntheticBatch(const Model& model, const ConformanceOptions& options, int64_t videos,
                             int64_t frames) {
  std::mt19937 rng(17);
  std::normal_distribution<float> value(0.0f, 1.0f);
  Batch batch;
  for (int64_t b = 0; b < videos; ++b) {
    batch.ids.push_back("video" + std::to_string(b));
    batch.label_ids.push_back(static_cast<int32_t>(rng() % options.num_classes));
    batch.label_offsets.push_back(static_cast<int64_t>(batch.label_ids.size()));
  }
  for (const std::string& name : model.InputFeatures()) {
    std::pair<int64_t, int64_t> shape;
    if (auto it = options.features.find(name); it != options.features.end()) {
      shape = it->second;
    } else if (name == "rgb" || name == "audio" || name == "mean_rgb" || name == "mean_audio") {
      shape = {name.find("rgb") != std::string::npos ? 1024 : 128,
               name.rfind("mean_", 0) == 0 ? 1 : frames};
    } else {
      return InvalidArgumentError("the model reads feature '" + name +
                                  "' of unknown width; give it with --feature " + name +
                                  "=WIDTH (frame level: WIDTHxFRAMES)");
    }
    Feature f{Tensor({videos, shape.second, shape.first}), {}};
    for (int64_t b = 0; b < videos; ++b) {
      // Lengths differ between videos (the padded path must be right too).
      const int32_t length = static_cast<int32_t>(std::max<int64_t>(1, shape.second - b % 3));
      f.lengths.push_back(length);
      for (int64_t t = 0; t < length; ++t)
        for (int64_t d = 0; d < shape.first; ++d)
          f.values.data()[(b * shape.second + t) * shape.first + d] = value(rng);
    }
    batch.features.emplace(name, std::move(f));
  }
  return batch;
}

}  // namespace reel::core
