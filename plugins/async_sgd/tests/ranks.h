// Inproc ranks as threads for the async_sgd tests: the optimizer on its own with known gradients
// (RunOnRanks, Group, Declare, IntGrad), and the optimizer under the core's trainer with its
// tiny model (train/testing.h: OnRankThreads, TrainTinyRank).
#ifndef REEL_PLUGINS_ASYNC_SGD_TESTS_RANKS_H_
#define REEL_PLUGINS_ASYNC_SGD_TESTS_RANKS_H_

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "async_optimizer.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/trainer.h"
#include "train/testing.h"

namespace reel::async_sgd {

using Communicators = std::vector<std::unique_ptr<Communicator>>;

// fn(comm) for every rank on its own thread; the statuses in rank order.
inline std::vector<Status> RunOnRanks(const Communicators& comms,
                                      const std::function<Status(Communicator&)>& fn) {
  std::vector<Status> out(comms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < comms.size(); ++i)
    threads.emplace_back([&, i] { out[i] = fn(*comms[i]); });
  for (auto& t : threads) t.join();
  return out;
}

inline Communicators Group(int n) {
  auto raw = core::CreateInprocGroup(n);
  EXPECT_TRUE(raw.ok());
  Communicators out;
  for (auto& c : *raw) out.push_back(core::WithRingCollectives(std::move(c)));
  return out;
}

inline Result<std::unique_ptr<AsyncOptimizer>> Make(const std::map<std::string, std::string>& given,
                                                    int rank, int world) {
  REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(AsyncOptions(), given));
  return AsyncOptimizer::Create(o, OptimizerContext{rank, world});
}

// Two blocks, so shards cross the padding between them.
inline void Declare(ParamArena& arena) {
  ASSERT_TRUE(arena.Declare("w", {3, 5}).ok());
  ASSERT_TRUE(arena.Declare("b", {7}).ok());
  arena.Finalize();
}

// Small integers: with lr 1 every sum is exact, whatever the order the pushes arrive in.
inline float IntGrad(int rank, int step, size_t i) {
  return static_cast<float>((rank * 7 + step * 3 + static_cast<int>(i)) % 5 - 2);
}
inline float SmoothGrad(int step, size_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.5 * step));
}

// Trains `steps` steps of the tiny model of `dim` features and `classes` classes on `train`
// (null on a server-only rank), `group` being the training ranks' own group; `eval` (may be
// null) evaluates, `tune` changes the trainer's options.
inline Result<core::TrainResult> TrainTinyRank(
    AsyncOptimizer& opt, Communicator& comm, Communicator& group, DataSource* train, int steps,
    int dim, int classes, StorageResolver& storage, DataSource* eval = nullptr,
    const std::function<void(core::TrainerOptions&)>& tune = nullptr) {
  ParamArena arena;
  core::testing::TinyModel model(dim, classes);
  REEL_RETURN_IF_ERROR(model.DeclareParams(arena));
  arena.Finalize();
  core::TrainerOptions t;
  t.steps = steps;
  t.num_classes = classes;
  t.model_name = "tiny";
  t.learning_rate = {.base = 0.1};
  if (tune) tune(t);
  core::RankComponents rc{train, eval, &model, &arena, &opt, &comm, &group};
  return core::RunTrainer(t, rc, storage);
}

// `inner`'s batches until `after` of them were taken, then DataLoss(`why`), as a disk that goes
// away: its rank's trainer then ends.
class FailingSource : public DataSource {
 public:
  FailingSource(core::testing::TinySource inner, int after, std::string why)
      : inner_(std::move(inner)), after_(after), why_(std::move(why)) {}
  Result<Batch> Next() override {
    if (taken_ == after_) return DataLossError(why_);
    ++taken_;
    return inner_.Next();
  }
  Status StartEpoch(int64_t epoch) override { return inner_.StartEpoch(epoch); }
  Result<std::string> Position() const override { return inner_.Position(); }
  Status Restore(std::string_view p) override { return inner_.Restore(p); }

 private:
  core::testing::TinySource inner_;
  const int after_;
  const std::string why_;
  int taken_ = 0;
};

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

#endif  // REEL_PLUGINS_ASYNC_SGD_TESTS_RANKS_H_
