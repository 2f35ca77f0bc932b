#include "measure.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/loss.h"
#include "reel/core/schedule.h"
#include "reel/param_arena.h"
#include "train/nonfinite.h"

namespace reel::cli {

Spread Summary(Times t) {
  std::sort(t.begin(), t.end());
  if (t.empty()) return {};
  const size_t n = t.size();
  return {t.front(), n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t.back()};
}

Result<double> Time(const std::function<Status()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  REEL_RETURN_IF_ERROR(fn());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Result<std::vector<std::unique_ptr<Communicator>>> LocalRanks(int n) {
  REEL_ASSIGN_OR_RETURN(auto comms, core::CreateInprocGroup(n));
  for (auto& c : comms) c = core::WithRingCollectives(std::move(c));
  return comms;
}

Status OnThreads(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> done(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { done[static_cast<size_t>(r)] = fn(r); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    REEL_RETURN_IF_ERROR(done[static_cast<size_t>(r)].WithContext("rank " + std::to_string(r)));
  return Status::Ok();
}

Status DrainEpoch(DataSource& source, int64_t* videos) {
  for (;;) {
    Result<Batch> batch = source.Next();
    if (batch.status().code() == StatusCode::kOutOfRange) return Status::Ok();
    REEL_RETURN_IF_ERROR(batch.status());
    if (videos != nullptr) *videos += batch->size();
  }
}

Result<ModelTimes> TimeModel(core::Registry& registry, const std::string& name,
                             const std::map<std::string, std::string>& options,
                             const core::ConformanceOptions& shape, int64_t batch, int64_t frames,
                             int reps, const std::string& rule, const StepInputs& inputs) {
  REEL_ASSIGN_OR_RETURN(auto model, registry.CreateModel(name, options,
                                                         {.num_classes = shape.num_classes,
                                                          .precision = inputs.precision}));
  ParamArena arena;
  REEL_RETURN_IF_ERROR(model->DeclareParams(arena));
  arena.Finalize();
  // The trainer's clock runs from before Initialize and the optimizer's Setup (trainer.cc).
  REEL_ASSIGN_OR_RETURN(const double init, Time([&] { return model->Initialize(1); }));
  std::vector<Batch> synthetic;
  if (inputs.batches.empty()) {
    REEL_ASSIGN_OR_RETURN(Batch input, core::SyntheticBatch(*model, shape, batch, frames));
    synthetic.push_back(std::move(input));
  }
  const std::vector<Batch>& batches = inputs.batches.empty() ? synthetic : inputs.batches;
  REEL_ASSIGN_OR_RETURN(auto optimizer, registry.CreateOptimizer("sync", {{"rule", rule}}));
  // As the trainer: the optimizer clips after its reduction if it can, else the step does.
  const bool optimizer_clips = optimizer->AcceptGradientClipping(inputs.clip_norm);
  REEL_ASSIGN_OR_RETURN(auto comms, LocalRanks(1));
  REEL_ASSIGN_OR_RETURN(const double setup,
                        Time([&] { return optimizer->Setup(arena, *comms[0]); }));
  // The step's parts in the repetition being timed: backward, and the update after it.
  double backward_s = 0, update_s = 0;
  auto step = [&](const Batch& input) -> Status {
    REEL_ASSIGN_OR_RETURN(Tensor logits, model->Forward(input, Mode::kTrain));
    REEL_ASSIGN_OR_RETURN(core::LossResult loss, core::SigmoidCrossEntropy(logits, input));
    const auto backward_start = std::chrono::steady_clock::now();
    REEL_RETURN_IF_ERROR(model->Backward(input, loss.dlogits));
    const auto update_start = std::chrono::steady_clock::now();
    backward_s += std::chrono::duration<double>(update_start - backward_start).count();
    const auto update_done = [&] {
      update_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - update_start).count();
    };
    // The trainer's pass over the gradient before the step: a finiteness check where the
    // optimizer clips (else the norm it takes answers it).
    if (inputs.stop_on_nonfinite && optimizer_clips && !core::AllFinite(arena.grads()))
      return DataLossError("a gradient is not finite on the batch being timed");
    if (!optimizer_clips) core::ClipByGlobalNorm(arena.grads(), inputs.clip_norm);
    const Status stepped = optimizer->Step(1e-3f);
    update_done();
    return stepped;
  };
  // One repetition steps over every batch in turn (the data's spread of lengths), as an epoch.
  auto steps = [&]() -> Status {
    for (const Batch& b : batches) REEL_RETURN_IF_ERROR(step(b));
    return Status::Ok();
  };
  auto forward = [&]() -> Status {
    for (const Batch& b : batches) REEL_RETURN_IF_ERROR(model->Forward(b, Mode::kInfer).status());
    return Status::Ok();
  };
  // The cold first step: first-touch allocations, kernel selection.
  REEL_ASSIGN_OR_RETURN(const double cold, Time([&] { return step(batches[0]); }));
  REEL_RETURN_IF_ERROR(model->Forward(batches[0], Mode::kInfer).status());
  ModelTimes out;
  out.params = arena.total_size();
  const double n = static_cast<double>(batches.size());
  for (int r = 0; r < reps; ++r) {  // alternated
    backward_s = update_s = 0;
    REEL_ASSIGN_OR_RETURN(double s, Time(steps));
    out.step.push_back(s / n);
    out.backward_share.push_back(backward_s / s);
    out.update_share.push_back(update_s / s);
    REEL_ASSIGN_OR_RETURN(double f, Time(forward));
    out.forward.push_back(f / n);
  }
  // What the first step cost beyond a warm one of the same batch, with the setup before it.
  REEL_ASSIGN_OR_RETURN(const double warm, Time([&] { return step(batches[0]); }));
  out.startup = init + setup + std::max(0.0, cold - warm);
  int64_t videos = 0, longest_sum = 0;
  for (const Batch& b : batches) {
    int64_t longest = 0;
    for (const auto& [feature, f] : b.features) {
      int64_t sum = 0;
      for (int32_t l : f.lengths) sum += l;
      if (f.values.dim(1) > 1) longest = std::max(longest, sum);
    }
    out.frame_count = std::max(out.frame_count, longest);
    longest_sum += longest;
    videos += b.size();
  }
  if (longest_sum > 0) out.mean_frames = static_cast<double>(longest_sum) / videos;
  return out;
}

}  // namespace reel::cli
