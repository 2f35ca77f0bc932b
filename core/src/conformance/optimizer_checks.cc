// Optimizer conformance (reel/optimizer.h) on a quadratic, f(w) = ½|w − t|², whose gradient is
// w − t: steps descend, two ranks train together and Finish, the state a checkpoint stores
// (SaveState) makes a fresh optimizer step exactly as the original does, and a foreign state is
// refused. Each rank's factory learns its rank and the world size (OptimizerContext).
#include <cmath>
#include <thread>

#include "checks.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"

namespace reel::core::conformance_internal {
namespace {

constexpr int64_t kParams = 10;
constexpr float kRate = 0.05f;

// The optimizer is declared last: the arena and the communicator outlive it (reel/optimizer.h),
// as an optimizer may still be using them until it is destroyed (a colocated server's thread).
struct Rank {
  std::unique_ptr<ParamArena> arena = std::make_unique<ParamArena>();
  std::unique_ptr<Communicator> comm;
  Owned<Optimizer> optimizer;
};

// Optimizers of a fresh in-process group of `n` ranks, set up over arenas holding `start`.
Result<std::vector<Rank>> MakeRanks(const Registry& registry, const ComponentEntry& entry,
                                    const ConformanceOptions& options, int n, float start) {
  REEL_ASSIGN_OR_RETURN(auto comms, CreateInprocGroup(n));
  std::vector<Rank> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Rank& rank = ranks[static_cast<size_t>(r)];
    REEL_ASSIGN_OR_RETURN(rank.optimizer, registry.CreateOptimizer(entry.info.name, options.options,
                                                                   OptimizerContext{r, n}));
    REEL_RETURN_IF_ERROR(rank.arena->Declare("w", {kParams}).status());
    rank.arena->Finalize();
    std::fill(rank.arena->values().begin(), rank.arena->values().end(), start);
    rank.comm = WithRingCollectives(std::move(comms[static_cast<size_t>(r)]));
  }
  // Setup may talk to the other ranks (a broadcast of rank 0's values): all at once.
  std::vector<Status> setup(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Rank& rank = ranks[static_cast<size_t>(r)];
      setup[static_cast<size_t>(r)] = rank.optimizer->Setup(*rank.arena, *rank.comm);
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    REEL_RETURN_IF_ERROR(
        setup[static_cast<size_t>(r)].WithContext("Setup of rank " + std::to_string(r)));
  return ranks;
}

// A rank that only serves (RankRoles::IsServerOnly) takes no steps.
bool ServesOnly(Optimizer& optimizer) {
  const RankRoles* roles = optimizer.rank_roles();
  return roles != nullptr && roles->IsServerOnly();
}

double Loss(const ParamArena& arena, float target) {
  double sum = 0;
  for (float w : arena.values()) sum += 0.5 * (w - target) * (w - target);
  return sum;
}

Status Steps(Rank& rank, float target, int steps) {
  for (int i = 0; i < steps; ++i) {
    auto w = rank.arena->values();
    auto g = rank.arena->grads();
    for (size_t j = 0; j < w.size(); ++j) g[j] = w[j] - target;
    REEL_RETURN_IF_ERROR(rank.optimizer->Step(kRate).WithContext("step " + std::to_string(i)));
  }
  return Status::Ok();
}

Status Descends(std::vector<Rank>& ranks) {
  const double before = Loss(*ranks[0].arena, 1.0f);
  REEL_RETURN_IF_ERROR(Steps(ranks[0], 1.0f, 40));
  const double after = Loss(*ranks[0].arena, 1.0f);
  if (!(after < 0.5 * before))
    return InvalidArgumentError("40 steps at rate " + std::to_string(kRate) +
                                " took the loss from " + std::to_string(before) + " to " +
                                std::to_string(after) + ", want below half");
  return ranks[0].optimizer->Finish().WithContext("Finish");
}

// Rank r's gradients pull towards 1 + 2r; together they pull towards 2 (1 and 3).
Status TwoRanks(std::vector<Rank>& ranks) {
  std::vector<Status> done(ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    threads.emplace_back([&, r] {
      if (!ServesOnly(*ranks[r].optimizer))
        done[r] = Steps(ranks[r], 1.0f + 2.0f * static_cast<float>(r), 40);
      if (done[r].ok()) done[r] = ranks[r].optimizer->Finish().WithContext("Finish");
    });
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < ranks.size(); ++r) {
    REEL_RETURN_IF_ERROR(done[r].WithContext("rank " + std::to_string(r)));
    if (!ServesOnly(*ranks[r].optimizer) &&
        !(Loss(*ranks[r].arena, 2.0f) < Loss(*ranks[r].arena, 0.0f)))
      return InvalidArgumentError("rank " + std::to_string(r) +
                                  " did not move towards the ranks' common minimum");
  }
  return Status::Ok();
}

Status StateRoundTrips(const Registry& registry, const ComponentEntry& entry,
                       const ConformanceOptions& options) {
  REEL_ASSIGN_OR_RETURN(auto original, MakeRanks(registry, entry, options, 1, 0.0f));
  REEL_RETURN_IF_ERROR(Steps(original[0], 1.0f, 5));
  // What a checkpoint stores: the lead's SaveState().
  REEL_ASSIGN_OR_RETURN(std::string state, original[0].optimizer->SaveState());
  auto w = original[0].arena->values();
  REEL_ASSIGN_OR_RETURN(auto restored, MakeRanks(registry, entry, options, 1, 0.0f));
  std::copy(w.begin(), w.end(), restored[0].arena->values().begin());
  REEL_RETURN_IF_ERROR(restored[0].optimizer->RestoreState(state).WithContext("RestoreState"));
  REEL_RETURN_IF_ERROR(Steps(original[0], 1.0f, 3));
  REEL_RETURN_IF_ERROR(Steps(restored[0], 1.0f, 3));
  auto a = original[0].arena->values(), b = restored[0].arena->values();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return InvalidArgumentError(
          "after SaveState, RestoreState into a fresh optimizer and 3 more "
          "steps each, parameter " +
          std::to_string(i) + " is " + std::to_string(a[i]) + " against " + std::to_string(b[i]));
  if (restored[0].optimizer->RestoreState("\x01not a state").ok())
    return InvalidArgumentError("RestoreState accepted a foreign state");
  return Status::Ok();
}

}  // namespace

void CheckOptimizer(const Registry& registry, const ComponentEntry& entry,
                    const ConformanceOptions& options, const CheckSink& sink) {
  Result<std::vector<Rank>> one = MakeRanks(registry, entry, options, 1, 0.0f);
  if (!Report(sink, "creates and sets up on one rank", one.status())) return;
  Report(sink, "steps descend a quadratic; Finish", Descends(*one));
  Result<std::vector<Rank>> two = MakeRanks(registry, entry, options, 2, 0.0f);
  if (Report(sink, "sets up on two ranks", two.status()))
    Report(sink, "two ranks step towards their common minimum; Finish", TwoRanks(*two));
  Report(sink, "SaveState/RestoreState continue exactly; a foreign state is refused",
         StateRoundTrips(registry, entry, options));
}

}  // namespace reel::core::conformance_internal
