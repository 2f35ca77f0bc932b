#include "reel/core/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <thread>

#include "checkpoint.pb.h"
#include "event.pb.h"
#include "reel/core/checkpoint.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/metrics.h"
#include "reel/recordio.h"
#include "train/testing.h"
#include "train/tiny_run.h"

namespace reel::core::trainer_test {
namespace {

using testing::MemStorage;
using testing::TinyModel;
using testing::TinySgd;
using testing::TinySource;

constexpr int kDim = testing::kTinyDim, kClasses = testing::kTinyClasses,
              kVideos = testing::kTinyVideos, kBatch = testing::kTinyBatch;
using Rank = testing::TinyRank;

std::unique_ptr<Communicator> Solo() { return testing::SoloCommunicator(); }
TrainerOptions BaseOptions() { return testing::TinyTrainerOptions(); }

// GAP of scoring every class by its frequency in the training data (the baseline to beat).
double FrequencyBaselineGap() {
  TinySource train(kVideos, kDim, kClasses, kBatch, 1, {0, 1}, false);
  TinySource eval(24, kDim, kClasses, kBatch, 999, {0, 1}, false);
  std::vector<float> freq(kClasses, 0.0f);
  for (auto b = train.Next(); b.ok(); b = train.Next())
    for (int32_t c : b->label_ids) freq[c] += 1.0f;
  MetricsAccumulator acc(kClasses, 20);
  for (auto b = eval.Next(); b.ok(); b = eval.Next())
    for (int64_t i = 0; i < b->size(); ++i) EXPECT_TRUE(acc.AddVideo(freq, b->labels(i)).ok());
  return acc.Compute().gap;
}

TEST(TrainerTest, LearnsBeyondFrequencyBaseline) {
  MemStorage storage;
  Rank r(0, 1, 5);
  auto comm = Solo();
  auto result = RunTrainer(BaseOptions(), r.components(comm.get()), storage);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 30);
  EXPECT_EQ(result->examples, 30 * kBatch);
  ASSERT_TRUE(result->final_eval.has_value());
  EXPECT_EQ(result->final_eval->videos, 24);
  EXPECT_GT(result->final_eval->gap, FrequencyBaselineGap() + 0.1);
  EXPECT_FALSE(result->interrupted);
}

TEST(TrainerTest, SameSeedIsBitReproducibleAndOtherSeedDiffers) {
  MemStorage storage;
  std::vector<float> p[3];
  for (int i = 0; i < 3; ++i) {
    Rank r(0, 1, i < 2 ? 5 : 6);
    TrainerOptions o = BaseOptions();
    o.seed = i < 2 ? 5 : 6;
    auto comm = Solo();
    ASSERT_TRUE(RunTrainer(o, r.components(comm.get(), false), storage).ok());
    p[i] = r.params();
  }
  EXPECT_EQ(p[0], p[1]);
  EXPECT_NE(p[0], p[2]);
}

TEST(TrainerTest, EpochBudget) {
  MemStorage storage;
  Rank r(0, 1, 5);
  TrainerOptions o = BaseOptions();
  o.steps = 0;
  o.epochs = 2;
  o.learning_rate = {.base = 0.1};
  auto comm = Solo();
  auto result = RunTrainer(o, r.components(comm.get(), false), storage);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 2 * kVideos / kBatch);
  EXPECT_EQ(result->epoch, 2);
}

// A source whose epoch e ends after `batches + e` batches: an async worker's or a resumed rank's
// share may differ from epoch to epoch.
class GrowingEpochs : public DataSource {
 public:
  GrowingEpochs(DataSource& inner, int batches) : inner_(inner), batches_(batches) {}
  Result<Batch> Next() override {
    if (given_ >= batches_ + epoch_) return OutOfRangeError("end of epoch");
    ++given_;
    return inner_.Next();
  }
  Status StartEpoch(int64_t epoch) override {
    epoch_ = epoch;
    given_ = 0;
    return inner_.StartEpoch(epoch);
  }
  Result<std::string> Position() const override { return inner_.Position(); }
  Status Restore(std::string_view p) override { return inner_.Restore(p); }

 private:
  DataSource& inner_;
  int batches_;
  int64_t epoch_ = 0, given_ = 0;
};

// The progress line's total projects the epochs left from the first; an epoch that runs longer
// raises it, so the step shown never passes the total ("step 19/18").
TEST(TrainerTest, ProgressTotalNeverFallsBelowTheStep) {
  MemStorage storage;
  Rank r(0, 1, 5);
  GrowingEpochs source(r.train, 3);  // epochs of 3, 4 and 5 batches
  TrainerOptions o = BaseOptions();
  o.steps = 0;
  o.epochs = 3;
  o.log_every_steps = 1;
  std::ostringstream progress;
  o.progress = &progress;
  auto comm = Solo();
  RankComponents c = r.components(comm.get(), false);
  c.train = &source;
  auto result = RunTrainer(o, c, storage);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->steps, 12);
  std::istringstream lines(progress.str());
  std::vector<std::string> totals;
  for (std::string line; std::getline(lines, line);) {
    long step = 0, total = 0;
    if (std::sscanf(line.c_str(), "epoch %*d  step %ld/%ld", &step, &total) == 2) {
      EXPECT_LE(step, total) << line;
      totals.push_back(std::to_string(step) + "/" + std::to_string(total));
    }
  }
  // Unknown in the first epoch; then 3 per epoch left, at least this epoch's steps so far.
  EXPECT_EQ(totals, (std::vector<std::string>{"4/9", "5/9", "6/9", "7/10", "8/10", "9/10", "10/10",
                                              "11/11", "12/12"}));
}

TEST(TrainerTest, InterruptThenResumeEqualsUninterrupted) {
  MemStorage storage;
  std::vector<float> want;
  {
    Rank r(0, 1, 5);
    auto comm = Solo();
    ASSERT_TRUE(RunTrainer(BaseOptions(), r.components(comm.get(), false), storage).ok());
    want = r.params();
  }
  TrainerOptions o = BaseOptions();
  o.checkpoint_dir = "mem://run/ckpt";
  o.checkpoint_every_steps = 4;
  o.keep_checkpoints = 2;
  {
    Rank r(0, 1, 5);
    auto comm = Solo();
    TrainerOptions first = o;
    first.should_stop = [](int64_t step) { return step >= 11; };  // "Ctrl-C" after step 11
    auto result = RunTrainer(first, r.components(comm.get(), false), storage);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->interrupted);
    EXPECT_EQ(result->steps, 11);
    EXPECT_EQ(result->last_checkpoint, "mem://run/ckpt/" + CheckpointName(11));
  }
  {
    Rank r(0, 1, 5);
    auto comm = Solo();
    TrainerOptions second = o;
    second.resume = true;
    second.seed = 77;  // a different init seed: the parameters must come from the checkpoint
    auto result = RunTrainer(second, r.components(comm.get(), false), storage);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->resumed);
    EXPECT_EQ(result->steps, 30);
    EXPECT_EQ(result->examples, 30 * kBatch);
    EXPECT_EQ(r.params(), want);
  }
  int kept = 0;
  for (const auto& [uri, bytes] : storage.objects())
    kept += uri.find("/ckpt/ckpt-") != std::string::npos;
  EXPECT_EQ(kept, 2);
}

// Interrupted exactly at the end of an epoch, a resumed run finds nothing left of that epoch: it
// must go on with the next one, not take the empty remainder for data that yields no batch.
TEST(TrainerTest, ResumeAtAnEpochBoundaryContinuesWithTheNextEpoch) {
  constexpr int kStepsPerEpoch = kVideos / kBatch;
  std::vector<float> want;
  int64_t want_epoch = 0;
  {
    MemStorage storage;
    Rank r(0, 1, 5);
    auto comm = Solo();
    auto result = RunTrainer(BaseOptions(), r.components(comm.get(), false), storage);
    ASSERT_TRUE(result.ok()) << result.status();
    want = r.params();
    want_epoch = result->epoch;
  }
  for (int stop_at : {kStepsPerEpoch, 2 * kStepsPerEpoch}) {
    MemStorage storage;
    TrainerOptions o = BaseOptions();
    o.checkpoint_dir = "mem://run/ckpt";
    {
      Rank r(0, 1, 5);
      auto comm = Solo();
      TrainerOptions first = o;
      first.should_stop = [stop_at](int64_t step) { return step >= stop_at; };
      auto result = RunTrainer(first, r.components(comm.get(), false), storage);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->steps, stop_at);
    }
    Rank r(0, 1, 5);
    auto comm = Solo();
    o.resume = true;
    auto result = RunTrainer(o, r.components(comm.get(), false), storage);
    ASSERT_TRUE(result.ok()) << "stopped at " << stop_at << ": " << result.status();
    EXPECT_EQ(result->steps, 30);
    EXPECT_EQ(result->epoch, want_epoch);
    EXPECT_EQ(r.params(), want) << "stopped at " << stop_at;
  }
}

// A finished run on an epoch budget, resumed with a larger budget (what ASHA does when it promotes
// a trial): it trains exactly the epochs it lacks and ends where a straight run ends.
TEST(TrainerTest, FinishedEpochRunResumedWithMoreEpochsEqualsAStraightRun) {
  constexpr int kStepsPerEpoch = kVideos / kBatch;
  TrainerOptions o = BaseOptions();
  o.steps = 0;
  o.epochs = 3;
  o.learning_rate = {.base = 0.1};
  std::vector<float> want;
  {
    MemStorage storage;
    Rank r(0, 1, 5);
    auto comm = Solo();
    ASSERT_TRUE(RunTrainer(o, r.components(comm.get(), false), storage).ok());
    want = r.params();
  }
  MemStorage storage;
  o.checkpoint_dir = "mem://run/ckpt";
  for (int epochs : {1, 2, 3}) {
    Rank r(0, 1, 5);
    auto comm = Solo();
    TrainerOptions part = o;
    part.epochs = epochs;
    part.resume = epochs > 1;
    auto result = RunTrainer(part, r.components(comm.get(), false), storage);
    ASSERT_TRUE(result.ok()) << epochs << " epochs: " << result.status();
    EXPECT_EQ(result->steps, epochs * kStepsPerEpoch) << epochs << " epochs";
    EXPECT_EQ(result->epoch, epochs);
    if (epochs == 3) {
      EXPECT_EQ(r.params(), want);
    }
  }
  {  // resumed again with the budget it has already met: nothing more to train
    Rank r(0, 1, 5);
    auto comm = Solo();
    TrainerOptions again = o;
    again.resume = true;
    auto result = RunTrainer(again, r.components(comm.get(), false), storage);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->steps, 3 * kStepsPerEpoch);
    EXPECT_EQ(r.params(), want);
  }
}

// Cosine on an epoch budget (no trainer.steps): it runs, anneals (the result differs from a
// constant rate) and a run resumed after its first epoch ends where the straight run ends.
TEST(TrainerTest, CosineOnAnEpochBudgetAnnealsAndResumes) {
  TrainerOptions o = BaseOptions();
  o.steps = 0;
  o.epochs = 3;
  o.learning_rate = {.base = 0.5, .schedule = "cosine", .min_lr = 0.01};
  auto train = [](const TrainerOptions& options, MemStorage& storage) {
    Rank r(0, 1, 5);
    auto comm = Solo();
    auto result = RunTrainer(options, r.components(comm.get(), false), storage);
    EXPECT_TRUE(result.ok()) << result.status();
    return r.params();
  };
  MemStorage scratch;
  const std::vector<float> cosine = train(o, scratch);
  TrainerOptions constant = o;
  constant.learning_rate = {.base = 0.5};
  EXPECT_NE(train(constant, scratch), cosine);
  MemStorage storage;
  o.checkpoint_dir = "mem://run/ckpt";
  TrainerOptions first = o;
  first.epochs = 1;
  train(first, storage);
  o.resume = true;
  EXPECT_EQ(train(o, storage), cosine);
}

TEST(TrainerTest, CorruptCheckpointStopsResumeAndChangesNothing) {
  MemStorage storage;
  TrainerOptions o = BaseOptions();
  o.steps = 6;
  o.checkpoint_dir = "mem://c";
  {
    Rank r(0, 1, 5);
    auto comm = Solo();
    ASSERT_TRUE(RunTrainer(o, r.components(comm.get(), false), storage).ok());
  }
  const std::string uri = "mem://c/" + CheckpointName(6);
  std::string bytes = storage.objects()[uri];
  bytes[bytes.size() / 2] ^= 0x10;
  storage.Put(uri, bytes);
  auto before = storage.objects();
  Rank r(0, 1, 5);
  auto initial = r.params();
  auto comm = Solo();
  o.resume = true;
  o.steps = 12;
  auto result = RunTrainer(o, r.components(comm.get(), false), storage);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(result.status().message().find(uri), std::string::npos) << result.status();
  EXPECT_EQ(storage.objects(), before);
  EXPECT_EQ(r.params(), initial);
}

TEST(TrainerTest, ResumeWithDifferentModelIsRefused) {
  MemStorage storage;
  TrainerOptions o = BaseOptions();
  o.steps = 3;
  o.checkpoint_dir = "mem://c";
  {
    Rank r(0, 1, 5);
    auto comm = Solo();
    ASSERT_TRUE(RunTrainer(o, r.components(comm.get(), false), storage).ok());
  }
  auto before = storage.objects();
  o.resume = true;
  {
    o.model_name = "other";
    Rank r(0, 1, 5);
    auto comm = Solo();
    auto result = RunTrainer(o, r.components(comm.get(), false), storage);
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().message().find("holds model 'tiny', not 'other'"), std::string::npos);
  }
  {
    o.model_name = "tiny";
    Rank r(0, 1, 5, kDim + 1);  // same name, other layout: feature width differs
    r.train = TinySource(kVideos, kDim, kClasses, kBatch, 5, {0, 1});
    auto comm = Solo();
    auto result = RunTrainer(o, r.components(comm.get(), false), storage);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(storage.objects(), before);
}

// Reads a TFRecord file, checking both CRCs of every record.
std::vector<std::string> ReadRecords(const std::string& file) {
  std::vector<std::string> out;
  size_t at = 0;
  auto u32 = [&](size_t p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<uint32_t>(static_cast<unsigned char>(file[p + i])) << (8 * i);
    return v;
  };
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size());
    uint64_t len = u32(at) | (static_cast<uint64_t>(u32(at + 4)) << 32);
    EXPECT_EQ(u32(at + 8), recordio::MaskCrc(recordio::Crc32c(file.substr(at, 8))));
    std::string data = file.substr(at + 12, len);
    EXPECT_EQ(u32(at + 12 + len), recordio::MaskCrc(recordio::Crc32c(data)));
    out.push_back(data);
    at += 16 + len;
  }
  return out;
}

TEST(TrainerTest, WritesMetricsLogAndTensorBoardEvents) {
  MemStorage storage;
  Rank r(0, 1, 5);
  TrainerOptions o = BaseOptions();
  o.steps = 10;
  o.eval_every_steps = 5;
  o.metrics_log = "mem://run/metrics.jsonl";
  o.tensorboard_dir = "mem://run/tb";
  std::ostringstream progress;
  o.progress = &progress;
  auto comm = Solo();
  auto result = RunTrainer(o, r.components(comm.get()), storage);
  ASSERT_TRUE(result.ok()) << result.status();
  // The result keeps the learning curve, not only the final evaluation.
  ASSERT_EQ(result->evals.size(), 2u);
  EXPECT_EQ(result->evals[0].first, 5);
  EXPECT_EQ(result->evals[1].first, 10);
  EXPECT_EQ(result->evals[1].second.gap, result->final_eval->gap);
  EXPECT_NE(result->evals[0].second.gap, result->evals[1].second.gap);

  std::string log = storage.objects()["mem://run/metrics.jsonl"];
  std::istringstream lines(log);
  int train_lines = 0, eval_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    ASSERT_EQ(line.front(), '{');
    ASSERT_EQ(line.back(), '}');
    if (line.find("\"loss\"") != std::string::npos) {
      ++train_lines;
      for (const char* key : {"\"step\"", "\"wall_time\"", "\"lr\"", "\"examples_per_sec\""})
        EXPECT_NE(line.find(key), std::string::npos) << line;
    }
    if (line.find("\"eval_gap\"") != std::string::npos) {
      ++eval_lines;
      // The job's examples when it was scored: one rank's batch at each step so far.
      const std::string key = "\"job_examples\":";
      const size_t at = line.find(key);
      ASSERT_NE(at, std::string::npos) << line;
      EXPECT_EQ(std::stod(line.substr(at + key.size())), 5.0 * eval_lines * kBatch) << line;
    }
  }
  EXPECT_EQ(train_lines, 2);  // steps 5 and 10
  EXPECT_EQ(eval_lines, 2);   // steps 5 and 10, no repeat at the end

  std::string events_uri;
  for (const auto& [uri, bytes] : storage.objects())
    if (uri.find("mem://run/tb/events.out.tfevents.") == 0) events_uri = uri;
  ASSERT_FALSE(events_uri.empty());
  auto records = ReadRecords(storage.objects()[events_uri]);
  ASSERT_GE(records.size(), 5u);
  reel::tensorboard::Event first;
  ASSERT_TRUE(first.ParseFromString(records[0]));
  EXPECT_EQ(first.file_version(), "brain.Event:2");
  std::set<std::string> tags;
  for (size_t i = 1; i < records.size(); ++i) {
    reel::tensorboard::Event e;
    ASSERT_TRUE(e.ParseFromString(records[i]));
    for (const auto& v : e.summary().value()) tags.insert(v.tag());
  }
  EXPECT_TRUE(tags.count("train/loss"));
  EXPECT_TRUE(tags.count("eval/gap"));
  EXPECT_NE(progress.str().find("eval @ step 10: GAP"), std::string::npos) << progress.str();
  EXPECT_NE(progress.str().find("step 10/10"), std::string::npos) << progress.str();
}

TEST(TrainerTest, QuietPrintsNothing) {
  MemStorage storage;
  Rank r(0, 1, 5);
  TrainerOptions o = BaseOptions();
  o.steps = 10;
  std::ostringstream progress;
  o.progress = &progress;
  o.verbosity = 0;
  auto comm = Solo();
  ASSERT_TRUE(RunTrainer(o, r.components(comm.get()), storage).ok());
  EXPECT_EQ(progress.str(), "");
}

// TinySgd implements only Setup, Step, SaveState and RestoreState (no RankRoles): the trainer
// keeps its ranks in step and checkpoints every rank's position.
TEST(TrainerTest, TwoInprocRanksStayInSyncAndCheckpointBoth) {
  MemStorage storage;
  testing::TinyGroup group(2);
  auto& comms = group.comms;
  auto& ranks = group.ranks;
  ASSERT_EQ(ranks[0]->optimizer.rank_roles(), nullptr);
  TrainerOptions o = BaseOptions();
  o.steps = 0;
  o.epochs = 3;  // 24 videos per rank: 3 batches an epoch
  o.learning_rate = {.base = 0.3};
  o.checkpoint_dir = "mem://multi";
  std::vector<Result<TrainResult>> results(2, Result<TrainResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back(
        [&, i] { results[i] = RunTrainer(o, ranks[i]->components(comms[i].get()), storage); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(results[i].ok()) << "rank " << i << ": " << results[i].status();
    EXPECT_EQ(results[i]->steps, 9);
    EXPECT_EQ(results[i]->examples, kVideos * 3);
    EXPECT_FALSE(results[i]->independent);
  }
  EXPECT_EQ(ranks[0]->params(), ranks[1]->params());
  ASSERT_TRUE(results[0]->final_eval.has_value());
  EXPECT_EQ(results[0]->final_eval->videos, 24);  // both shards of the eval set
  EXPECT_EQ(results[0]->final_eval->gap, results[1]->final_eval->gap);
  auto ckpt = LoadCheckpoint(storage, "mem://multi");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->world_size, 2);
  ASSERT_EQ(ckpt->data_positions.size(), 2u);
  EXPECT_EQ(ckpt->step, 9);
}

TEST(TrainerTest, BadOptionsAreInvalidArgument) {
  MemStorage storage;
  Rank r(0, 1, 5);
  auto comm = Solo();
  TrainerOptions o = BaseOptions();
  o.resume = true;  // without a checkpoint directory
  EXPECT_EQ(RunTrainer(o, r.components(comm.get()), storage).status().code(),
            StatusCode::kInvalidArgument);
  o = BaseOptions();
  o.steps = 0;
  o.epochs = 0;
  EXPECT_EQ(RunTrainer(o, r.components(comm.get()), storage).status().code(),
            StatusCode::kInvalidArgument);
  for (auto [field, set] : {std::pair<const char*, void (*)(TrainerOptions&)>{
                                "num_classes", [](TrainerOptions& t) { t.num_classes = 0; }},
                            {"eval_top_k", [](TrainerOptions& t) { t.eval_top_k = 0; }}}) {
    o = BaseOptions();
    set(o);
    Status s = RunTrainer(o, r.components(comm.get()), storage).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace reel::core::trainer_test

namespace reel::core::trainer_test {
namespace {

// Runs two inproc ranks to completion (or interruption) and returns rank 0's parameters; rank 1
// runs with `o1` when given (e.g. another stop flag), else with `o`.
std::vector<float> TwoRanks(testing::MemStorage& storage, const TrainerOptions& o,
                            const TrainerOptions* o1 = nullptr) {
  testing::TinyGroup group(2);
  auto& comms = group.comms;
  auto& ranks = group.ranks;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      auto r =
          RunTrainer(i == 1 && o1 ? *o1 : o, ranks[i]->components(comms[i].get(), false), storage);
      EXPECT_TRUE(r.ok()) << "rank " << i << ": " << r.status();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ranks[0]->params(), ranks[1]->params());
  return ranks[0]->params();
}

TEST(TrainerTest, TwoRanksInterruptThenResumeEqualsUninterrupted) {
  testing::MemStorage storage;
  TrainerOptions o = BaseOptions();
  o.steps = 10;  // 3 batches per rank and epoch: crosses epochs
  std::vector<float> want = TwoRanks(storage, o);
  o.checkpoint_dir = "mem://two";
  TrainerOptions first = o;
  // Both ranks poll the same flag; the ranks agree on stopping after step 4.
  first.should_stop = [](int64_t step) { return step >= 4; };
  TwoRanks(storage, first);
  auto ckpt = LoadCheckpoint(storage, "mem://two");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->step, 4);
  TrainerOptions second = o;
  second.resume = true;
  EXPECT_EQ(TwoRanks(storage, second), want);
}

// Ranks that step together with different budgets would wait in each other's collectives until
// the deadline: both refuse at the start instead, naming the field and every rank's value, before
// training or writing anything.
TEST(TrainerTest, RanksWithDifferentSchedulesAreRefusedBeforeTraining) {
  testing::MemStorage storage;
  testing::TinyGroup group(2);
  auto& comms = group.comms;
  auto& ranks = group.ranks;
  const std::vector<float> before = ranks[0]->params();
  TrainerOptions o = BaseOptions();
  o.steps = 0;
  o.epochs = 3;
  o.checkpoint_dir = "mem://schedules";
  o.timeout = std::chrono::seconds(30);
  TrainerOptions fewer = o;
  fewer.epochs = 2;
  std::vector<Status> st(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      st[i] =
          RunTrainer(i == 1 ? fewer : o, ranks[i]->components(comms[i].get()), storage).status();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(st[i].code(), StatusCode::kInvalidArgument) << "rank " << i << ": " << st[i];
    EXPECT_NE(st[i].message().find("every rank must use the same trainer.epochs (rank 0: 3, rank "
                                   "1: 2)"),
              std::string::npos)
        << st[i];
  }
  EXPECT_EQ(ranks[0]->params(), before);
  EXPECT_FALSE(LoadCheckpoint(storage, "mem://schedules").ok());
}

// A signal may reach only one rank's process (or thread): the ranks still stop together, after
// the same step, so the checkpoint rank 0 writes holds every rank's position, and resuming from
// it ends where the uninterrupted run does. Either rank may be the one interrupted.
TEST(TrainerTest, OneRankInterruptedStopsBothAtTheSameStep) {
  for (int interrupted : {0, 1}) {
    SCOPED_TRACE("interrupted rank " + std::to_string(interrupted));
    testing::MemStorage storage;
    TrainerOptions o = BaseOptions();
    o.steps = 10;
    std::vector<float> want = TwoRanks(storage, o);
    o.checkpoint_dir = "mem://one";
    TrainerOptions stops = o, goes_on = o;
    stops.should_stop = [](int64_t step) { return step >= 4; };
    goes_on.should_stop = [](int64_t) { return false; };
    if (interrupted == 0)
      TwoRanks(storage, stops, &goes_on);
    else
      TwoRanks(storage, goes_on, &stops);
    auto ckpt = LoadCheckpoint(storage, "mem://one");
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    EXPECT_EQ(ckpt->step, 4);
    EXPECT_EQ(ckpt->data_positions.size(), 2u);
    TrainerOptions second = o;
    second.resume = true;
    EXPECT_EQ(TwoRanks(storage, second), want);
  }
}

// An optimizer whose state lives elsewhere and moves on while the lead checkpoints (async_sgd's
// servers): SaveState() brings the arena to the parameters of its state's instant, here
// every parameter to the number of states collected so far.
class CuttingSgd : public TinySgd {
 public:
  Status Setup(ParamArena& arena, Communicator& comm) override {
    arena_ = &arena;
    return TinySgd::Setup(arena, comm);
  }
  Result<std::string> SaveState() override {
    ++cuts_;
    for (float& v : arena_->values()) v = static_cast<float>(cuts_);
    return TinySgd::SaveState();
  }

 private:
  ParamArena* arena_ = nullptr;
  int cuts_ = 0;
};

// A checkpoint takes the parameters after the optimizer's state (Optimizer::SaveState), so
// the two are one snapshot; before, it took them first, and async_sgd's values could be older
// than the versions its state named.
TEST(TrainerTest, ACheckpointTakesTheParametersOfTheOptimizersStateInstant) {
  MemStorage storage;
  Rank r(0, 1, 5);
  CuttingSgd optimizer;
  TrainerOptions o = BaseOptions();
  o.steps = 4;
  o.checkpoint_every_steps = 2;
  o.keep_checkpoints = 0;
  o.checkpoint_dir = "mem://cut";
  auto comm = Solo();
  RankComponents rc{&r.train, nullptr, &r.model, &r.arena, &optimizer, comm.get()};
  ASSERT_TRUE(RunTrainer(o, rc, storage).ok());
  for (const auto& [step, cut] : {std::pair{2, 1.0f}, {4, 2.0f}}) {
    auto state = DecodeCheckpoint(storage.objects()["mem://cut/" + CheckpointName(step)], "ckpt");
    ASSERT_TRUE(state.ok()) << state.status();
    for (const auto& block : state->params)
      EXPECT_EQ(block.values, std::vector<float>(block.values.size(), cut))
          << "step " << step << ", " << block.name;
  }
}

// A number field of a metrics log line; NaN if the line has none.
double Field(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  return std::stod(line.substr(at + key.size() + 4));
}

// The whole job's examples/s counts every rank's examples, the same in the live line, the log
// lines, the metrics log and on_event, with the lead's own beside it: rank 1 trains batches of
// 16 beside the lead's 8, so the job trains 24 examples a step, three times the lead's (the
// live line showed the lead's rate times the ranks, twice it). The figures are checked against
// each other, never against a speed.
TEST(TrainerTest, EveryOutputGivesTheWholeJobsRateAndTheWorkersOwn) {
  MemStorage storage;
  testing::TinyGroup group(2);
  auto& comms = group.comms;
  auto& ranks = group.ranks;
  // Both take 3 batches an epoch: the lead 24 videos in 8s, rank 1 all 48 in 16s.
  ranks[1]->train = TinySource(kVideos, kDim, kClasses, 2 * kBatch, 5, {0, 1});
  TrainerOptions o = BaseOptions();
  o.steps = 0;
  o.epochs = 2;
  o.log_every_steps = 3;
  o.metrics_log = "mem://rates/metrics.jsonl";
  std::ostringstream progress;
  o.progress = &progress;
  o.tty = true;  // the live line, and the log lines as notes (verbosity 2)
  o.verbosity = 2;
  std::vector<TrainEvent> events;
  o.on_event = [&](const TrainEvent& e) {
    if (e.kind == TrainEvent::Kind::kLog) events.push_back(e);
  };
  std::vector<Result<TrainResult>> results(2, Result<TrainResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      results[i] = RunTrainer(o, ranks[i]->components(comms[i].get(), false), storage);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(results[i].ok()) << "rank " << i << ": " << results[i].status();
  constexpr double kRatio = 3.0;
  // Every line shows both, the job's three times the lead's (up to their rounding to 0.1).
  const std::vector<testing::RateLine> lines = testing::RateLines(progress.str());
  bool live = false;
  std::map<int64_t, double> logged;  // step -> the job's rate in its log line
  for (const testing::RateLine& l : lines) {
    EXPECT_NEAR(l.job, kRatio * l.worker, 0.05 * (1 + kRatio) + 1e-9)
        << "step " << l.step << (l.live ? " (live)" : "") << "\n"
        << progress.str();
    live = live || l.live;
    if (!l.live) logged[l.step] = l.job;
  }
  EXPECT_TRUE(live) << progress.str();
  ASSERT_EQ(logged.size(), 2u) << progress.str();
  // The metrics log and on_event give the log lines' figures.
  std::istringstream log(storage.objects()["mem://rates/metrics.jsonl"]);
  size_t i = 0;
  for (std::string line; std::getline(log, line);) {
    if (line.find("\"loss\"") == std::string::npos) continue;
    const double job = Field(line, "examples_per_sec");
    const double worker = Field(line, "worker_examples_per_sec");
    EXPECT_NEAR(job, kRatio * worker, 1e-9 * job) << line;
    const int64_t step = static_cast<int64_t>(Field(line, "step"));
    ASSERT_TRUE(logged.count(step)) << line;
    EXPECT_NEAR(logged[step], job, 0.05 + 1e-9) << line;
    ASSERT_LT(i, events.size());
    EXPECT_EQ(events[i].step, step);
    EXPECT_NEAR(events[i].examples_per_sec, job, 1e-12 * job);
    EXPECT_NEAR(events[i].worker_examples_per_sec, worker, 1e-12 * job);
    ++i;
  }
  EXPECT_EQ(i, 2u);
  EXPECT_EQ(events.size(), 2u);
}

// The observer an embedding host hooks in (the Python module's callbacks) sees every logged window
// and every evaluation with the values the result reports, and can stop the run via should_stop.
TEST(TrainerTest, OnEventSeesEveryLogAndEvalAndCanStopTheRun) {
  MemStorage storage;
  Rank r(0, 1, 5);
  auto comm = Solo();
  TrainerOptions o = BaseOptions();
  o.eval_every_steps = 10;
  std::vector<int64_t> logs, evals;
  double last_log_loss = -1;
  bool stop = false;
  o.on_event = [&](const TrainEvent& e) {
    if (e.kind == TrainEvent::Kind::kLog) {
      logs.push_back(e.step);
      last_log_loss = e.loss;
    } else {
      evals.push_back(e.step);
      EXPECT_GT(e.eval.videos, 0);
    }
    if (e.kind == TrainEvent::Kind::kEval && e.step == 20) stop = true;
  };
  o.should_stop = [&](int64_t) { return stop; };
  auto result = RunTrainer(o, r.components(comm.get()), storage);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->interrupted);
  EXPECT_EQ(result->steps, 20);
  EXPECT_EQ(logs, (std::vector<int64_t>{5, 10, 15, 20}));
  EXPECT_EQ(evals, (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(last_log_loss, result->last_loss);
  ASSERT_EQ(result->evals.size(), 2u);
}

}  // namespace
}  // namespace reel::core::trainer_test
