// One rank of a `reel train` run with async_sgd under the core's trainer, ranks as threads, with
// the core's tiny model (train/testing.h): what the colocated and lost-worker tests share.
#ifndef REEL_PLUGINS_ASYNC_SGD_TESTS_TINY_RANK_H_
#define REEL_PLUGINS_ASYNC_SGD_TESTS_TINY_RANK_H_

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "async_optimizer.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/trainer.h"
#include "train/testing.h"

namespace reel::async_sgd {

// Trains `steps` steps of the tiny model of `dim` features and `classes` classes on `train`
// (null on a server-only rank), `group` being the training ranks' own group.
inline Result<core::TrainResult> TrainTinyRank(AsyncOptimizer& opt, Communicator& comm,
                                               Communicator& group, DataSource* train, int steps,
                                               int dim, int classes, StorageResolver& storage) {
  ParamArena arena;
  core::testing::TinyModel model(dim, classes);
  REEL_RETURN_IF_ERROR(model.DeclareParams(arena));
  arena.Finalize();
  core::TrainerOptions t;
  t.steps = steps;
  t.num_classes = classes;
  t.model_name = "tiny";
  t.learning_rate = {.base = 0.1};
  core::RankComponents rc{train, nullptr, &model, &arena, &opt, &comm, &group};
  return core::RunTrainer(t, rc, storage);
}

// fn(rank, comm) on a thread per rank of an inproc world of `world` ranks (with ring
// collectives); the results in rank order. `comm` is the rank's own: a fn may reset it, as a
// dying process's goes away.
using RankFn = std::function<Result<core::TrainResult>(int, std::unique_ptr<Communicator>&)>;
inline std::vector<Result<core::TrainResult>> OnRankThreads(int world, const RankFn& fn) {
  std::vector<Result<core::TrainResult>> results(world, InternalError("not run"));
  auto raw = core::CreateInprocGroup(world);
  if (!raw.ok()) {
    results.assign(world, raw.status());
    return results;
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& c : *raw) comms.push_back(core::WithRingCollectives(std::move(c)));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { results[r] = fn(r, comms[r]); });
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_TESTS_TINY_RANK_H_
