// `reel plan` end to end: a machine measured, then planned for; and the inputs it refuses, each
// with what is wrong and what to do.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "reel/cpu_bf16.h"

namespace reel::e2e::plan_test {
namespace {

namespace fs = std::filesystem;

const std::string kRepo = REEL_SOURCE_DIR;

class PlanTest : public ::testing::Test {
 protected:
  // One quick measurement shared by the tests, the logistic model at 3862 classes on the
  // repository's real shards, in the one command a user on a fresh machine runs: measure, then
  // plan for 1 and 2 nodes.
  static void SetUpTestSuite() {
    dir_ = new std::string(ScratchDir("plan"));
    measured_ = new RunResult(Reel({"plan",
                                    "--measure",
                                    "--quick",
                                    "--reps",
                                    "1",
                                    "--config",
                                    Config(),
                                    "--set",
                                    "trainer.num_classes=3862",
                                    "--set",
                                    "data.options.files=" + kRepo + kTrainShards,
                                    "--profile",
                                    Profile(),
                                    "--videos",
                                    "200000",
                                    "--bytes",
                                    "1GB",
                                    "--nodes",
                                    "1,2",
                                    "--link",
                                    "1Gbit/s"}));
  }
  static constexpr const char* kTrainShards = "/data/yt8m/validate000[01].tfrecord";
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete measured_;
  }
  static std::string Config() { return kRepo + "/configs/logistic.pbtxt"; }
  static std::string Profile() { return *dir_ + "/profile.txt"; }
  static RunResult Plan(std::vector<std::string> extra, const std::string& profile = Profile()) {
    std::vector<std::string> args = {
        "plan", "--config", Config(), "--set", "trainer.num_classes=3862", "--profile", profile};
    args.insert(args.end(), extra.begin(), extra.end());
    return Reel(args);
  }
  static std::string* dir_;
  static RunResult* measured_;
};
std::string* PlanTest::dir_ = nullptr;
RunResult* PlanTest::measured_ = nullptr;

TEST_F(PlanTest, MeasuresThisMachineIntoAProfileAndPlansInOneCommand) {
  ASSERT_EQ(measured_->code, 0) << measured_->err;
  const std::string profile = ReadFile(Profile());
  EXPECT_NE(profile.find("reel_machine_profile 1"), std::string::npos) << profile;
  EXPECT_NE(profile.find("model logistic "), std::string::npos) << profile;
  for (const char* key : {"decode_frame_bytes_per_core", "disk_read_bytes", "reduce_bytes",
                          "transfer_bytes", "apply_params_per_core"})
    EXPECT_NE(profile.find(key), std::string::npos) << key;
  // The plan follows in the same command, from the profile just written.
  for (const std::string& text : {std::string("| 1 |"), std::string("| 2 |"),
                                  std::string("bottleneck"), std::string("Assumptions"), Profile()})
    EXPECT_NE(measured_->out.find(text), std::string::npos) << text << "\n" << measured_->out;
  EXPECT_EQ(measured_->out.find("reel_machine_profile"), std::string::npos) << measured_->out;
}

// The step is timed on the config's own batches; when its files match nothing here, on a
// synthetic batch, and the command says so and still writes the profile, startup included.
TEST_F(PlanTest, WithoutTheConfigsDataTheStepIsTimedOnASyntheticBatchSayingSo) {
  const std::string profile = *dir_ + "/synthetic.txt";
  RunResult r = Reel({"plan", "--measure", "--quick", "--reps", "1", "--config", Config(), "--set",
                      "trainer.num_classes=3862", "--set",
                      "data.options.files=" + *dir_ + "/none/*.tfrecord", "--profile", profile});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("timing the step on a synthetic batch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no file matches"), std::string::npos) << r.err;
  const std::string text = ReadFile(profile);
  EXPECT_NE(text.find("model logistic "), std::string::npos) << text;
  EXPECT_NE(text.find(" startup_s="), std::string::npos) << text;
  EXPECT_EQ(text.find(" fill_s_per_record="), std::string::npos) << text;  // no source to time
}

// An epoch's first batch waits for the source's shuffle buffer (docs/capacity.md, "fill"): the
// profile times it on the config's own data, and the plan counts the config's buffer.
TEST_F(PlanTest, AnEpochsFirstBatchWaitsForTheShuffleBuffersFill) {
  ASSERT_EQ(measured_->code, 0) << measured_->err;
  const std::string profile = ReadFile(Profile());
  ASSERT_NE(profile.find(" fill_s_per_record="), std::string::npos) << profile;
  auto fill = [&](const std::string& buffer) {
    RunResult r = Plan({"--set", "data.options.shuffle_buffer=" + buffer, "--videos", "200000",
                        "--bytes", "1GB", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return JsonField(r.out, "fill_seconds");
  };
  const double none = fill("0"), some = fill("4000"), more = fill("8000");
  EXPECT_GT(none, 0);
  EXPECT_GT(some, none);
  // Linear in the buffer's records (the JSON gives 6 significant digits).
  EXPECT_NEAR(more - none, 2 * (some - none), 1e-4 * more);
  RunResult negative =
      Plan({"--set", "data.options.shuffle_buffer=x", "--videos", "200000", "--bytes", "1GB"});
  EXPECT_EQ(negative.code, 1);
  EXPECT_NE(negative.err.find("shuffle_buffer"), std::string::npos) << negative.err;
}

TEST_F(PlanTest, PlansEveryNodeCountWithItsPartsAndBottleneck) {
  ASSERT_EQ(measured_->code, 0) << measured_->err;
  RunResult r =
      Plan({"--videos", "200000", "--bytes", "1GB", "--nodes", "1,2,4", "--link", "1Gbit/s"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* text : {"| 1 |", "| 2 |", "| 4 |", "bottleneck", "exchange", "Assumptions"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  RunResult json = Plan({"--videos", "200000", "--bytes", "1GB", "--nodes", "1", "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_GT(JsonField(json.out, "epoch_seconds"), 0) << json.out;
  EXPECT_DOUBLE_EQ(JsonField(json.out, "scaling_efficiency"), 1) << json.out;
  EXPECT_DOUBLE_EQ(JsonField(json.out, "exchange_seconds"), 0) << json.out;
  RunResult async = Plan({"--set", "optimizer.name=async_sgd", "--videos", "200000", "--bytes",
                          "1GB", "--nodes", "3", "--link", "1Gbit/s", "--json"});
  ASSERT_EQ(async.code, 0) << async.err;
  EXPECT_NE(async.out.find("\"optimizer\": \"async_sgd\""), std::string::npos) << async.out;
  EXPECT_GT(JsonField(async.out, "servers_seconds"), 0) << async.out;
}

// The sync optimizer's exchange as it runs (docs/capacity.md, "The model"): the profile splits
// the step, the plan shows the update and the exposed exchange apart, and the optimizer's
// options change them: zero_stage 1 halves the update on 2 nodes, compression shrinks the
// exchange after backward, an unknown compression is refused naming it.
TEST_F(PlanTest, TheUpdateAndTheExposedExchangeArePlannedAsTheOptimizerRuns) {
  ASSERT_EQ(measured_->code, 0) << measured_->err;
  const std::string profile = ReadFile(Profile());
  for (const char* key : {"memory_bytes", " backward_fraction=", " update_fraction="})
    EXPECT_NE(profile.find(key), std::string::npos) << key << "\n" << profile;
  const std::vector<std::string> two = {"--videos", "200000", "--bytes", "1GB",   "--nodes",
                                        "2",        "--link", "1Gbit/s", "--json"};
  auto plan = [&](std::vector<std::string> sets) {
    sets.insert(sets.end(), two.begin(), two.end());
    return Plan(sets);
  };
  RunResult plain = plan({});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_DOUBLE_EQ(JsonField(plain.out, "bucket_mb"), 4) << plain.out;
  EXPECT_GT(JsonField(plain.out, "update_seconds"), 0) << plain.out;
  EXPECT_GT(JsonField(plain.out, "exchange_seconds"), 0) << plain.out;
  RunResult sharded = plan({"--set", "optimizer.options.zero_stage=1"});
  ASSERT_EQ(sharded.code, 0) << sharded.err;
  EXPECT_DOUBLE_EQ(JsonField(sharded.out, "zero_stage"), 1) << sharded.out;
  EXPECT_NEAR(JsonField(sharded.out, "update_seconds"), JsonField(plain.out, "update_seconds") / 2,
              1e-5 * JsonField(plain.out, "update_seconds"));
  RunResult after = plan({"--set", "optimizer.options.bucket_mb=0"});
  RunResult bf16 = plan(
      {"--set", "optimizer.options.bucket_mb=0", "--set", "optimizer.options.compression=bf16"});
  ASSERT_EQ(after.code, 0) << after.err;
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  EXPECT_NE(bf16.out.find("\"compressed\": true"), std::string::npos) << bf16.out;
  EXPECT_LT(JsonField(bf16.out, "exchange_seconds"), JsonField(after.out, "exchange_seconds"));
  RunResult int8 = plan({"--set", "optimizer.options.compression=int8"});
  EXPECT_EQ(int8.code, 1);
  EXPECT_NE(int8.err.find("optimizer.options.compression: 'int8' is not none, bf16 or fp16"),
            std::string::npos)
      << int8.err;
  // A profile an older reel wrote (no split, no copy rate): the exchange after backward still
  // plans; the overlapped one is refused saying to measure again, and the file is left as it was.
  std::string text;
  std::istringstream lines(profile);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("memory_bytes", 0) == 0) continue;
    if (const size_t at = line.find(" backward_fraction="); at != std::string::npos) line.erase(at);
    text += line + "\n";
  }
  WriteFile(*dir_ + "/older.txt", text);
  RunResult refused =
      Plan({"--videos", "200000", "--bytes", "1GB", "--nodes", "2", "--link", "1Gbit/s"},
           *dir_ + "/older.txt");
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("measure again with `reel plan --measure`"), std::string::npos)
      << refused.err;
  EXPECT_EQ(ReadFile(*dir_ + "/older.txt"), text);
  RunResult planned = Plan({"--set", "optimizer.options.bucket_mb=0", "--videos", "200000",
                            "--bytes", "1GB", "--nodes", "2", "--link", "1Gbit/s"},
                           *dir_ + "/older.txt");
  EXPECT_EQ(planned.code, 0) << planned.err;
}

// The step is measured in the config's trainer.precision as this CPU resolves it: a bf16 plan
// does not read the fp32 measurement (it names the bf16 one missing; on a CPU without bf16 it is
// refused), an fp32 one does, and another word is refused.
TEST_F(PlanTest, APlanInBf16NeedsAMeasurementInBf16) {
  ASSERT_EQ(measured_->code, 0) << measured_->err;
  const bool bf16_cpu = ReadCpuBf16Features().avx512_bf16;
  RunResult bf16 = Plan({"--set", "trainer.precision=bf16", "--videos", "1000", "--bytes", "1GB"});
  EXPECT_EQ(bf16.code, 1);
  EXPECT_NE(bf16.err.find(bf16_cpu ? "|precision=bf16" : "trainer.precision"), std::string::npos)
      << bf16.err;
  RunResult fp32 = Plan({"--set", "trainer.precision=fp32", "--videos", "1000", "--bytes", "1GB"});
  EXPECT_EQ(fp32.code, 0) << fp32.err;
  RunResult word = Plan({"--set", "trainer.precision=half", "--videos", "1000", "--bytes", "1GB"});
  EXPECT_EQ(word.code, 1);
  EXPECT_NE(word.err.find("trainer.precision: expected"), std::string::npos) << word.err;
}

TEST_F(PlanTest, ImpossibleInputsAreRefusedSayingWhy) {
  ASSERT_EQ(measured_->code, 0) << measured_->err;
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--videos", "1000", "--bytes", "1GB", "--nodes", "0"}, "at least 1 node"},
      {{"--videos", "1000", "--bytes", "1GB", "--nodes", "2", "--link", "0Gbit/s"},
       "link rate per node must be a positive number"},
      {{"--videos", "1000", "--bytes", "1GB", "--nodes", "2"}, "link rate per node"},
      {{"--videos", "40", "--bytes", "1GB", "--nodes", "2", "--link", "1Gbit/s"},
       "smaller than one batch of every training rank"},
      {{"--videos", "1000", "--bytes", "1 parsec", "--nodes", "1"}, "--bytes"},
      {{"--videos", "1000", "--nodes", "1"}, "--videos N --bytes SIZE"},
      {{"--dataset", "imagenet", "--nodes", "1"}, "yt8m-frame"},
      {{"--set", "trainer.batch_size=7", "--videos", "1000", "--bytes", "1GB"},
       "no measurement of model logistic"},
  };
  for (const auto& [args, says] : bad) {
    RunResult r = Plan(args);
    EXPECT_EQ(r.code, 1) << says;
    EXPECT_NE(r.err.find(says), std::string::npos) << says << "\n" << r.err;
  }
  RunResult missing = Plan({"--videos", "1000", "--bytes", "1GB"}, *dir_ + "/none.txt");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("reel plan --measure"), std::string::npos) << missing.err;
  // A profile written by another format version: refused, the file left as it was.
  std::string text = ReadFile(Profile());
  text.replace(text.find("reel_machine_profile 1"), 22, "reel_machine_profile 9");
  WriteFile(*dir_ + "/v9.txt", text);
  RunResult old = Plan({"--videos", "1000", "--bytes", "1GB"}, *dir_ + "/v9.txt");
  EXPECT_EQ(old.code, 1);
  EXPECT_NE(old.err.find("format version 9"), std::string::npos) << old.err;
  EXPECT_EQ(ReadFile(*dir_ + "/v9.txt"), text);
}

}  // namespace
}  // namespace reel::e2e::plan_test
