// Test helpers shared by the model plugins' tests: a local copy of the training loss (the real one
// is the core's; models only ever see dlogits), finite-difference gradient checks, and the check
// of a model's gradient reports (reel/model.h's GradientSink).
//
// Thread-safety: pure functions.
#ifndef REEL_LAYERS_TESTING_H_
#define REEL_LAYERS_TESTING_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "reel/batch.h"
#include "reel/layers/init.h"
#include "reel/model.h"
#include "reel/param_arena.h"
#include "reel/tensor.h"

namespace reel::layers::testing {

struct LossAndGrad {
  double loss = 0;
  std::vector<float> dlogits;  // [B, C]
};

// Per-class sigmoid cross-entropy from logits, summed over classes, averaged over the batch,
// in the stable form max(x, 0) - x y + log(1 + exp(-|x|)); d/dx = sigmoid(x) - y.
inline LossAndGrad SigmoidCrossEntropy(const Tensor& logits, const Batch& batch) {
  const int64_t b_n = logits.dim(0), c_n = logits.dim(1);
  std::vector<float> y(static_cast<size_t>(b_n * c_n), 0.0f);
  for (int64_t b = 0; b < b_n; ++b)
    for (int32_t c : batch.labels(b)) y[static_cast<size_t>(b * c_n + c)] = 1.0f;
  LossAndGrad out;
  out.dlogits.resize(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const double x = logits.data()[i];
    out.loss += std::max(x, 0.0) - x * y[i] + std::log1p(std::exp(-std::abs(x)));
    out.dlogits[i] =
        static_cast<float>((1.0 / (1.0 + std::exp(-x)) - y[i]) / static_cast<double>(b_n));
  }
  out.loss /= static_cast<double>(b_n);
  return out;
}

// Random values in [-scale, scale).
inline std::vector<float> RandomVector(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.Symmetric(scale);
  return v;
}

// Compares `analytic` (dLoss/dparams) with central differences of `loss` at up to `max_checks`
// indices of `params` (all of them when there are fewer), perturbing params in place.
inline ::testing::AssertionResult CheckGradient(std::span<float> params,
                                                std::span<const float> analytic,
                                                const std::function<double()>& loss, float eps,
                                                double rtol, double atol, int max_checks = 24,
                                                uint64_t seed = 7, const std::string& what = "") {
  std::vector<size_t> idx;
  if (params.size() <= static_cast<size_t>(max_checks)) {
    for (size_t i = 0; i < params.size(); ++i) idx.push_back(i);
  } else {
    Rng rng(seed);
    for (int i = 0; i < max_checks; ++i) idx.push_back(rng.Next() % params.size());
  }
  for (size_t i : idx) {
    const float saved = params[i];
    params[i] = saved + eps;
    const double up = loss();
    params[i] = saved - eps;
    const double down = loss();
    params[i] = saved;
    const double numeric = (up - down) / (2.0 * static_cast<double>(eps));
    const double a = analytic[i];
    if (std::abs(a - numeric) > atol + rtol * std::max(std::abs(a), std::abs(numeric)))
      return ::testing::AssertionFailure()
             << what << "[" << i << "]: analytic " << a << " vs numeric " << numeric;
  }
  return ::testing::AssertionSuccess();
}

// A whole model's gradients: one training Forward + Backward of the loss on `batch`, then
// CheckGradient on every parameter block (up to `max_checks` indices each, seeded by the block
// id). Fails naming every block that disagrees.
inline ::testing::AssertionResult CheckModelGradients(Model& model, ParamArena& arena,
                                                      const Batch& batch, float eps, double rtol,
                                                      double atol, int max_checks) {
  auto logits = model.Forward(batch, Mode::kTrain);
  if (!logits.ok()) return ::testing::AssertionFailure() << "Forward: " << logits.status();
  LossAndGrad lg = SigmoidCrossEntropy(*logits, batch);
  Status back = model.Backward(batch, Tensor({logits->dim(0), logits->dim(1)}, lg.dlogits));
  if (!back.ok()) return ::testing::AssertionFailure() << "Backward: " << back;
  std::vector<float> analytic(arena.grads().begin(), arena.grads().end());
  auto loss = [&] { return SigmoidCrossEntropy(*model.Forward(batch, Mode::kInfer), batch).loss; };
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  bool failed = false;
  for (ParamArena::BlockId id = 0; id < static_cast<int>(arena.blocks().size()); ++id) {
    const auto& block = arena.block(id);
    std::span<const float> g(analytic.data() + block.offset, static_cast<size_t>(block.size));
    ::testing::AssertionResult r = CheckGradient(arena.values(id), g, loss, eps, rtol, atol,
                                                 max_checks, static_cast<uint64_t>(id), block.name);
    if (!r) {
      if (!failed) result = ::testing::AssertionFailure();
      failed = true;
      result << r.message() << "\n";
    }
  }
  return result;
}

// A model's GradientSink reports (reel/model.h): one training step reporting to a sink that copies
// each range when told, then the same step without a sink. Succeeds when every block was
// reported exactly once, the ranges came in descending arena order (the order "sync" reduces
// its buckets in, docs/distributed.md), each range held at its report what it holds after
// Backward() (final when reported), and the gradient is the same, bit for bit, without a sink.
inline ::testing::AssertionResult CheckGradientReports(Model& model, ParamArena& arena,
                                                       const Batch& batch) {
  struct Recorder : GradientSink {
    explicit Recorder(ParamArena& a) : arena(a) {}
    void GradientsReady(int64_t offset, int64_t size) override {
      ranges.push_back({offset, size});
      auto g = arena.grads().subspan(static_cast<size_t>(offset), static_cast<size_t>(size));
      copies.emplace_back(g.begin(), g.end());
    }
    ParamArena& arena;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    std::vector<std::vector<float>> copies;
  } recorder(arena);
  auto step = [&]() -> Status {
    REEL_ASSIGN_OR_RETURN(Tensor logits, model.Forward(batch, Mode::kTrain));
    LossAndGrad lg = SigmoidCrossEntropy(logits, batch);
    return model.Backward(batch, Tensor({logits.dim(0), logits.dim(1)}, lg.dlogits));
  };
  model.SetGradientSink(&recorder);
  Status with = step();
  model.SetGradientSink(nullptr);
  if (!with.ok()) return ::testing::AssertionFailure() << "Backward with a sink: " << with;
  const std::vector<float> reported(arena.grads().begin(), arena.grads().end());
  std::vector<int> times(arena.blocks().size(), 0);
  for (size_t r = 0; r < recorder.ranges.size(); ++r) {
    const auto [offset, size] = recorder.ranges[r];
    if (r > 0 && offset + size > recorder.ranges[r - 1].first)
      return ::testing::AssertionFailure()
             << "range " << r << " [" << offset << ", +" << size
             << ") is not below the one before, [" << recorder.ranges[r - 1].first << ", ...)";
    for (int64_t i = 0; i < size; ++i)
      if (recorder.copies[r][static_cast<size_t>(i)] != reported[static_cast<size_t>(offset + i)])
        return ::testing::AssertionFailure()
               << "range " << r << " changed after it was reported, at arena index " << offset + i;
    for (size_t b = 0; b < arena.blocks().size(); ++b)
      if (arena.blocks()[b].offset >= offset &&
          arena.blocks()[b].offset + arena.blocks()[b].size <= offset + size)
        ++times[b];
  }
  for (size_t b = 0; b < times.size(); ++b)
    if (times[b] != 1)
      return ::testing::AssertionFailure()
             << "block " << arena.blocks()[b].name << " reported " << times[b] << " times";
  Status without = step();
  if (!without.ok()) return ::testing::AssertionFailure() << "Backward without a sink: " << without;
  if (!std::equal(reported.begin(), reported.end(), arena.grads().begin()))
    return ::testing::AssertionFailure() << "the gradient differs without a sink";
  return ::testing::AssertionSuccess() << recorder.ranges.size() << " ranges";
}

// Plain SGD (`lr` times the gradient) for `steps` training steps on one batch; succeeds when the
// last step's loss is below `factor` times the first's, and says both either way.
inline ::testing::AssertionResult SgdLowersLoss(Model& model, ParamArena& arena, const Batch& batch,
                                                int steps, float lr, double factor) {
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    auto logits = model.Forward(batch, Mode::kTrain);
    if (!logits.ok()) return ::testing::AssertionFailure() << "Forward: " << logits.status();
    LossAndGrad lg = SigmoidCrossEntropy(*logits, batch);
    (step == 0 ? first : last) = lg.loss;
    Status back = model.Backward(batch, Tensor({logits->dim(0), logits->dim(1)}, lg.dlogits));
    if (!back.ok()) return ::testing::AssertionFailure() << "Backward: " << back;
    auto v = arena.values();
    auto g = arena.grads();
    for (size_t i = 0; i < v.size(); ++i) v[i] -= lr * g[i];
  }
  ::testing::AssertionResult result =
      last < factor * first ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
  return result << "loss: first " << first << ", last " << last;
}

}  // namespace reel::layers::testing

#endif  // REEL_LAYERS_TESTING_H_
