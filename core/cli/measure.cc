#include "measure.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/loss.h"
#include "reel/param_arena.h"

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
                             int reps, const std::string& rule) {
  REEL_ASSIGN_OR_RETURN(auto model,
                        registry.CreateModel(name, options, {.num_classes = shape.num_classes}));
  ParamArena arena;
  REEL_RETURN_IF_ERROR(model->DeclareParams(arena));
  arena.Finalize();
  REEL_RETURN_IF_ERROR(model->Initialize(1));
  REEL_ASSIGN_OR_RETURN(Batch input, core::SyntheticBatch(*model, shape, batch, frames));
  REEL_ASSIGN_OR_RETURN(auto optimizer, registry.CreateOptimizer("sync", {{"rule", rule}}));
  REEL_ASSIGN_OR_RETURN(auto comms, LocalRanks(1));
  REEL_RETURN_IF_ERROR(optimizer->Setup(arena, *comms[0]));
  auto step = [&]() -> Status {
    REEL_ASSIGN_OR_RETURN(Tensor logits, model->Forward(input, Mode::kTrain));
    REEL_ASSIGN_OR_RETURN(core::LossResult loss, core::SigmoidCrossEntropy(logits, input));
    REEL_RETURN_IF_ERROR(model->Backward(input, loss.dlogits));
    return optimizer->Step(1e-3f);
  };
  auto forward = [&]() -> Status { return model->Forward(input, Mode::kInfer).status(); };
  REEL_RETURN_IF_ERROR(step());  // warm-up: first-touch allocations, kernel selection
  REEL_RETURN_IF_ERROR(forward());
  ModelTimes out;
  out.params = arena.total_size();
  for (int r = 0; r < reps; ++r) {  // alternated
    REEL_ASSIGN_OR_RETURN(double s, Time(step));
    out.step.push_back(s);
    REEL_ASSIGN_OR_RETURN(double f, Time(forward));
    out.forward.push_back(f);
  }
  for (const auto& [feature, f] : input.features) {
    int64_t sum = 0;
    for (int32_t l : f.lengths) sum += l;
    if (f.values.dim(1) > 1) out.frame_count = std::max(out.frame_count, sum);
  }
  return out;
}

}  // namespace reel::cli
