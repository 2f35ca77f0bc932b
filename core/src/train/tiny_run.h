// A tiny training run for the trainer's tests: the pieces one rank needs (TinySource, TinyModel,
// TinySgd over a ParamArena), a one-rank communicator or a group of ranks, and trainer options
// that train in milliseconds. Header only, for *_test.cc.
#ifndef REEL_CORE_SRC_TRAIN_TINY_RUN_H_
#define REEL_CORE_SRC_TRAIN_TINY_RUN_H_

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/trainer.h"
#include "train/testing.h"

namespace reel::core::testing {

inline constexpr int kTinyDim = 6, kTinyClasses = 12, kTinyVideos = 48, kTinyBatch = 8;

// `n` inproc ranks, each with the host's ring collectives, as hosts give them to components.
inline std::vector<std::unique_ptr<Communicator>> InprocRingGroup(int n) {
  auto group = CreateInprocGroup(n);
  EXPECT_TRUE(group.ok());
  std::vector<std::unique_ptr<Communicator>> out;
  if (!group.ok()) return out;
  for (auto& c : *group) out.push_back(WithRingCollectives(std::move(c)));
  return out;
}

inline std::unique_ptr<Communicator> SoloCommunicator() {
  return std::move(InprocRingGroup(1).front());
}

// Everything one rank needs, built from scratch like a fresh process would.
struct TinyRank {
  TinyRank(int rank, int world, uint64_t seed, int model_dim = kTinyDim)
      : train(kTinyVideos, kTinyDim, kTinyClasses, kTinyBatch, seed, {rank, world}),
        eval(24, kTinyDim, kTinyClasses, kTinyBatch, 999, {rank, world}, false),
        model(model_dim, kTinyClasses) {
    EXPECT_TRUE(model.DeclareParams(arena).ok());
    arena.Finalize();
  }
  RankComponents components(Communicator* comm, bool with_eval = true) {
    return {&train, with_eval ? &eval : nullptr, &model, &arena, &optimizer, comm};
  }
  std::vector<float> params() const { return {arena.values().begin(), arena.values().end()}; }
  TinySource train, eval;
  ParamArena arena;  // outlives the model, as the Model contract asks
  TinyModel model;
  TinySgd optimizer;
};

// N inproc ranks with ring collectives, each with its own components, as N processes have them.
struct TinyGroup {
  explicit TinyGroup(int n, uint64_t seed = 5) : comms(InprocRingGroup(n)) {
    if (comms.empty()) return;
    for (int i = 0; i < n; ++i) ranks.push_back(std::make_unique<TinyRank>(i, n, seed));
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<TinyRank>> ranks;
};

inline TrainerOptions TinyTrainerOptions() {
  TrainerOptions o;
  o.steps = 30;
  o.seed = 5;
  o.learning_rate = {.base = 0.5, .schedule = "cosine", .warmup_steps = 3};
  o.log_every_steps = 5;
  o.num_classes = kTinyClasses;
  o.model_name = "tiny";
  o.config_text = "model { name: \"tiny\" }";
  return o;
}

}  // namespace reel::core::testing

#endif  // REEL_CORE_SRC_TRAIN_TINY_RUN_H_
