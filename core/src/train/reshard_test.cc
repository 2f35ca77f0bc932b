// Resuming a run on a different number of ranks: parameters, optimizer state, step and epoch
// carry over, and every record of the interrupted epoch is trained on exactly once across the
// old and the new ranks. The ranks are inproc threads; the data source is a double that keeps
// the DataSource contract for RestoreResharded the way the tfrecord source does.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <thread>

#include "optim/sync_optimizer.h"
#include "reel/core/checkpoint.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/trainer.h"
#include "train/testing.h"

namespace reel::core::reshard_test {
namespace {

using testing::MemStorage;
using testing::TinyModel;
using testing::TinySgd;
using testing::TinySource;

constexpr int kDim = 4, kClasses = 6, kVideos = 30, kBatch = 4;

// Ids seen by the models of every rank in training steps, shared by the ranks of all runs.
class Seen {
 public:
  void Add(const Batch& b) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& id : b.ids) ++count_[id];
  }
  std::map<std::string, int> counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> count_;
};

class RecordingModel : public TinyModel {
 public:
  explicit RecordingModel(Seen* seen) : TinyModel(kDim, kClasses), seen_(seen) {}
  Result<Tensor> Forward(const Batch& batch, Mode mode) override {
    if (mode == Mode::kTrain) seen_->Add(batch);
    return TinyModel::Forward(batch, mode);
  }

 private:
  Seen* seen_;
};

// Videos v0..v(N-1) in an order shuffled per epoch. The records not in `consumed_` (those an
// earlier run had trained on, empty in a normal epoch) are dealt out one by one: the j-th goes to
// rank j % world. Position: "reshard E R W N CONSUMED" with N this rank's delivered records and
// CONSUMED a comma list or "-".
class ReshardSource : public DataSource {
 public:
  ReshardSource(ShardSpec shard, uint64_t seed) : shard_(shard), seed_(seed) { Share(); }

  Result<Batch> Next() override {
    if (next_ >= share_.size()) return OutOfRangeError("end of epoch");
    const size_t n = std::min<size_t>(kBatch, share_.size() - next_);
    Batch b;
    Feature f{Tensor({static_cast<int64_t>(n), 1, kDim}), std::vector<int32_t>(n, 1)};
    for (size_t i = 0; i < n; ++i) {
      const int v = share_[next_ + i];
      b.ids.push_back("v" + std::to_string(v));
      for (int d = 0; d < kDim; ++d) f.values.data()[i * kDim + d] = ((v * 7 + d * 3) % 11) / 5.0f;
      b.label_ids.push_back(v % kClasses);
      b.label_offsets.push_back(static_cast<int64_t>(b.label_ids.size()));
    }
    b.features["x"] = std::move(f);
    next_ += n;
    return b;
  }
  Status StartEpoch(int64_t epoch) override {
    epoch_ = epoch;
    consumed_.clear();
    Share();
    return Status::Ok();
  }
  Result<std::string> Position() const override {
    std::string c;
    for (int v : consumed_) c += (c.empty() ? "" : ",") + std::to_string(v);
    return "reshard " + std::to_string(epoch_) + " " + std::to_string(shard_.rank) + " " +
           std::to_string(shard_.world_size) + " " + std::to_string(next_) + " " +
           (c.empty() ? "-" : c);
  }
  Status Restore(std::string_view text) override {
    REEL_ASSIGN_OR_RETURN(Parsed p, Parse(text));
    if (p.rank != shard_.rank || p.world != shard_.world_size)
      return InvalidArgumentError("position of another shard");
    epoch_ = p.epoch;
    consumed_ = p.consumed;
    Share();
    next_ = p.delivered;
    return Status::Ok();
  }
  Status RestoreResharded(std::span<const std::string> positions) override {
    std::set<int> consumed;
    for (const std::string& text : positions) {
      REEL_ASSIGN_OR_RETURN(Parsed p, Parse(text));
      ReshardSource old({p.rank, p.world}, seed_);
      REEL_RETURN_IF_ERROR(old.Restore(text));
      consumed.insert(p.consumed.begin(), p.consumed.end());
      consumed.insert(old.share_.begin(), old.share_.begin() + p.delivered);
      epoch_ = p.epoch;
    }
    consumed_ = consumed;
    Share();
    return Status::Ok();
  }

 private:
  struct Parsed {
    int64_t epoch = 0, delivered = 0;
    int rank = 0, world = 1;
    std::set<int> consumed;
  };
  static Result<Parsed> Parse(std::string_view text) {
    std::istringstream in{std::string(text)};
    std::string tag, consumed;
    Parsed p;
    if (!(in >> tag >> p.epoch >> p.rank >> p.world >> p.delivered >> consumed) || tag != "reshard")
      return InvalidArgumentError("not a reshard position: " + std::string(text));
    std::istringstream list(consumed == "-" ? "" : consumed);
    for (std::string v; std::getline(list, v, ',');) p.consumed.insert(std::stoi(v));
    return p;
  }
  // This rank's records of the epoch, in order.
  void Share() {
    std::vector<int> order(kVideos);
    for (int v = 0; v < kVideos; ++v) order[v] = v;
    std::mt19937_64 rng(seed_ * 1000003u + static_cast<uint64_t>(epoch_));
    std::shuffle(order.begin(), order.end(), rng);
    share_.clear();
    size_t j = 0;
    for (int v : order) {
      if (consumed_.count(v)) continue;
      if (j++ % static_cast<size_t>(shard_.world_size) == static_cast<size_t>(shard_.rank))
        share_.push_back(v);
    }
    next_ = 0;
  }

  ShardSpec shard_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  std::set<int> consumed_;
  std::vector<int> share_;
  size_t next_ = 0;
};

struct Rank {
  Rank(int rank, int world, Seen* seen) : train({rank, world}, 7), model(seen) {
    EXPECT_TRUE(model.DeclareParams(arena).ok());
    arena.Finalize();
  }
  ReshardSource train;
  ParamArena arena;
  RecordingModel model;
  TinySgd optimizer;
  std::unique_ptr<Optimizer> sync;  // when set, trains instead of `optimizer`
};

TrainerOptions Options() {
  TrainerOptions o;
  o.steps = 0;
  o.epochs = 1;
  o.seed = 3;
  o.learning_rate = {.base = 0.2};
  o.num_classes = kClasses;
  o.model_name = "tiny";
  o.config_text = "model { name: \"tiny\" }";
  o.checkpoint_dir = "mem://reshard";
  return o;
}

// Trains `world` inproc ranks; every rank must succeed. Returns rank 0's result; `params` gets
// rank 0's parameters (and the ranks must agree on them).
// `zero_stage` non-empty: the ranks train with "sync" (Adam) at that zero_stage.
TrainResult RunRanks(int world, const TrainerOptions& o, MemStorage& storage, Seen& seen,
                     std::vector<float>* params = nullptr, const std::string& zero_stage = "") {
  auto group = CreateInprocGroup(world);
  EXPECT_TRUE(group.ok());
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int i = 0; i < world; ++i) {
    comms.push_back(WithRingCollectives(std::move((*group)[i])));
    ranks.push_back(std::make_unique<Rank>(i, world, &seen));
    if (!zero_stage.empty()) {
      auto opts = ParseOptions(SyncOptimizerOptions(), {{"zero_stage", zero_stage}});
      EXPECT_TRUE(opts.ok()) << opts.status();
      auto sync = MakeSyncOptimizer(*opts);
      EXPECT_TRUE(sync.ok()) << sync.status();
      if (sync.ok()) ranks.back()->sync = std::move(*sync);
    }
  }
  std::vector<Result<TrainResult>> results(world, Result<TrainResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int i = 0; i < world; ++i)
    threads.emplace_back([&, i] {
      Rank& r = *ranks[i];
      Optimizer* opt = r.sync ? r.sync.get() : &r.optimizer;
      results[i] =
          RunTrainer(o, {&r.train, nullptr, &r.model, &r.arena, opt, comms[i].get()}, storage);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < world; ++i) {
    EXPECT_TRUE(results[i].ok()) << "rank " << i << ": " << results[i].status();
    if (!results[i].ok()) return {};
    EXPECT_EQ(std::vector<float>(ranks[i]->arena.values().begin(), ranks[i]->arena.values().end()),
              std::vector<float>(ranks[0]->arena.values().begin(), ranks[0]->arena.values().end()));
  }
  if (params) params->assign(ranks[0]->arena.values().begin(), ranks[0]->arena.values().end());
  return *results[0];
}

// Interrupts `before` ranks after two steps of epoch 0 and resumes on `after` ranks for the rest
// of `epochs`: every video is trained on exactly once per epoch.
void ResumeOnOtherRanks(int before, int after, int epochs) {
  MemStorage storage;
  Seen seen;
  TrainerOptions first = Options();
  first.should_stop = [](int64_t step) { return step >= 2; };
  TrainResult stopped = RunRanks(before, first, storage, seen);
  ASSERT_TRUE(stopped.interrupted);
  ASSERT_EQ(stopped.steps, 2);
  auto ckpt = LoadCheckpoint(storage, "mem://reshard");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->world_size, before);
  EXPECT_EQ(seen.counts().size(), static_cast<size_t>(2 * kBatch * before));

  TrainerOptions second = Options();
  second.resume = true;
  second.epochs = epochs;
  TrainResult done = RunRanks(after, second, storage, seen);
  EXPECT_TRUE(done.resumed);
  EXPECT_EQ(done.epoch, epochs);
  std::map<std::string, int> counts = seen.counts();
  ASSERT_EQ(counts.size(), static_cast<size_t>(kVideos));
  for (const auto& [id, n] : counts) EXPECT_EQ(n, epochs) << id;
  // The new ranks split what was left evenly, a rank one record short joining the last step;
  // later epochs are split among them as usual.
  const int64_t left = kVideos - 2 * kBatch * before;
  const int64_t per_epoch = (kVideos + after * kBatch - 1) / (after * kBatch);
  EXPECT_EQ(done.steps,
            2 + (left + after * kBatch - 1) / (after * kBatch) + (epochs - 1) * per_epoch);
}

TEST(ReshardTest, TwoRanksResumeOnThree) {
  ResumeOnOtherRanks(2, 3, 1);
  ResumeOnOtherRanks(2, 3, 2);
}
TEST(ReshardTest, ThreeRanksResumeOnTwo) {
  ResumeOnOtherRanks(3, 2, 1);
  ResumeOnOtherRanks(3, 2, 2);
}
TEST(ReshardTest, ThreeRanksResumeOnOne) { ResumeOnOtherRanks(3, 1, 1); }

// Parameters, optimizer state, step and epoch of the checkpoint are where the resumed run on
// another number of ranks starts: with no step left to train, it saves them back unchanged.
TEST(ReshardTest, ParametersAndOptimizerStateCarryOver) {
  MemStorage storage;
  Seen seen;
  TrainerOptions first = Options();
  first.should_stop = [](int64_t step) { return step >= 2; };
  RunRanks(2, first, storage, seen);
  auto saved = LoadCheckpoint(storage, "mem://reshard");
  ASSERT_TRUE(saved.ok()) << saved.status();
  TrainerOptions again = Options();
  again.resume = true;
  again.steps = 2;  // already reached
  TrainResult r = RunRanks(3, again, storage, seen);
  EXPECT_EQ(r.steps, 2);
  EXPECT_EQ(r.epoch, 0);
  auto resaved = LoadCheckpoint(storage, "mem://reshard");
  ASSERT_TRUE(resaved.ok()) << resaved.status();
  EXPECT_EQ(resaved->world_size, 3);
  EXPECT_EQ(resaved->step, 2);
  EXPECT_EQ(resaved->epoch, 0);
  EXPECT_EQ(resaved->optimizer_state, saved->optimizer_state);
  ASSERT_EQ(resaved->params.size(), saved->params.size());
  for (size_t i = 0; i < saved->params.size(); ++i)
    EXPECT_EQ(resaved->params[i].values, saved->params[i].values) << saved->params[i].name;
}

// The sync optimizer's sharded update (zero_stage 1) writes the checkpoint an unsharded run
// writes (its ranks gather the state before the lead saves it), and resumes from either on
// another number of ranks: 2 ranks interrupted after two steps, 3 ranks finishing the epoch, every
// mix of sharded and unsharded ending with the parameters of the unsharded pair, bit for bit.
TEST(ReshardTest, ShardedUpdateCheckpointsResumeAcrossRanksAndStages) {
  auto run = [](const std::string& first_stage, const std::string& second_stage,
                std::string* first_state, std::vector<float>* params) {
    MemStorage storage;
    Seen seen;
    TrainerOptions first = Options();
    first.should_stop = [](int64_t step) { return step >= 2; };
    RunRanks(2, first, storage, seen, nullptr, first_stage);
    auto saved = LoadCheckpoint(storage, "mem://reshard");
    ASSERT_TRUE(saved.ok()) << saved.status();
    *first_state = saved->optimizer_state;
    TrainerOptions second = Options();
    second.resume = true;
    TrainResult done = RunRanks(3, second, storage, seen, params, second_stage);
    EXPECT_TRUE(done.resumed);
  };
  std::string plain_state;
  std::vector<float> plain;
  run("0", "0", &plain_state, &plain);
  ASSERT_FALSE(plain.empty());
  for (auto [a, b] :
       std::vector<std::pair<std::string, std::string>>{{"1", "1"}, {"1", "0"}, {"0", "1"}}) {
    SCOPED_TRACE("zero_stage " + a + " then " + b);
    std::string state;
    std::vector<float> params;
    run(a, b, &state, &params);
    EXPECT_EQ(state, plain_state);
    EXPECT_EQ(params, plain);
  }
}

// A source that cannot split an epoch anew keeps the old refusal, naming both sizes.
TEST(ReshardTest, SourceWithoutReshardingIsRefused) {
  MemStorage storage;
  TrainerOptions o = Options();
  o.should_stop = [](int64_t step) { return step >= 1; };
  auto run = [&](int world, const TrainerOptions& opt) {
    auto group = CreateInprocGroup(world);
    std::vector<std::unique_ptr<Communicator>> comms;
    std::vector<std::unique_ptr<TinySource>> sources;
    std::vector<std::unique_ptr<ParamArena>> arenas;
    std::vector<std::unique_ptr<TinyModel>> models;
    std::vector<std::unique_ptr<TinySgd>> opts;
    for (int i = 0; i < world; ++i) {
      comms.push_back(WithRingCollectives(std::move((*group)[i])));
      sources.push_back(
          std::make_unique<TinySource>(24, kDim, kClasses, kBatch, 1, ShardSpec{i, world}));
      arenas.push_back(std::make_unique<ParamArena>());
      models.push_back(std::make_unique<TinyModel>(kDim, kClasses));
      EXPECT_TRUE(models[i]->DeclareParams(*arenas[i]).ok());
      arenas[i]->Finalize();
      opts.push_back(std::make_unique<TinySgd>());
    }
    std::vector<Status> status(world);
    std::vector<std::thread> threads;
    for (int i = 0; i < world; ++i)
      threads.emplace_back([&, i] {
        status[i] = RunTrainer(opt,
                               {sources[i].get(), nullptr, models[i].get(), arenas[i].get(),
                                opts[i].get(), comms[i].get()},
                               storage)
                        .status();
      });
    for (auto& t : threads) t.join();
    return status;
  };
  for (const Status& s : run(2, o)) ASSERT_TRUE(s.ok()) << s;
  o.should_stop = nullptr;
  o.resume = true;
  for (const Status& s : run(3, o)) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("written by 2 ranks, this run has 3"), std::string::npos) << s;
    EXPECT_NE(s.message().find("cannot resume on a different number of ranks"), std::string::npos)
        << s;
  }
}

}  // namespace
}  // namespace reel::core::reshard_test
