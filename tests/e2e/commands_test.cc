// `reel train/eval/predict` end to end: the example configs, bad input, and Ctrl-C + --resume.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "e2e_util.h"
#include "reel/cpu_bf16.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

const std::string kRepo = REEL_SOURCE_DIR;

// Small frame-level data shared by the tests of this file: 16 classes, short videos.
class CommandsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new std::string(ScratchDir("commands_data"));
    RunResult r =
        Reel({"synth", "--out", *data_ + "/train", "--videos", "96", "--classes", "16", "--level",
              "frame", "--shards", "2", "--min-frames", "3", "--max-frames", "6", "--seed", "3"});
    ASSERT_EQ(r.code, 0) << r.err;
    r = Reel({"synth", "--out", *data_ + "/test", "--videos", "32", "--classes", "16", "--level",
              "frame", "--shards", "1", "--min-frames", "3", "--max-frames", "6", "--seed", "3",
              "--prefix", "test"});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*data_);
    delete data_;
  }

  // Overrides that point a frame-level config at the test data and a scratch run directory.
  static std::vector<std::string> Small(const std::string& config, const std::string& run,
                                        int steps) {
    return {"train",
            "--config",
            kRepo + "/configs/" + config + ".pbtxt",
            "--set",
            "data.options.files=" + *data_ + "/train/*.tfrecord",
            "--set",
            "eval_data.options.files=" + *data_ + "/test/*.tfrecord",
            "--set",
            "data.options.max_frames=6",
            "--set",
            "eval_data.options.max_frames=6",
            "--set",
            "trainer.steps=" + std::to_string(steps),
            "--set",
            "trainer.batch_size=16",
            "--set",
            "trainer.checkpoint_dir=" + run + "/ckpt",
            "--set",
            "trainer.metrics_log=" + run + "/metrics.jsonl",
            "--set",
            "trainer.tensorboard_dir=" + run + "/tb",
            "--set",
            "trainer.eval_every_steps=0",
            "--set",
            "trainer.log_every_steps=1"};
  }
  // `reel train` of `config` with the `sets` (section.field=value), expected to fail before
  // training: no checkpoint is written. The scratch run directory is removed.
  static RunResult RefusedRun(const std::string& config, const std::vector<std::string>& sets) {
    const std::string run = ScratchDir("refused");
    auto args = Small(config, run, 1);
    for (const std::string& set : sets) args.insert(args.end(), {"--set", set});
    RunResult r = Reel(args);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_FALSE(fs::exists(run + "/ckpt"));
    fs::remove_all(run);
    return r;
  }
  static std::string* data_;
};
std::string* CommandsTest::data_ = nullptr;

TEST_F(CommandsTest, FrameLevelConfigsRun) {
  for (const char* config : {"two_stream", "bilstm_video", "bilstm_audio"}) {
    const std::string run = ScratchDir(std::string("cfg_") + config);
    auto args = Small(config, run, 3);
    RunResult r = Reel(args);
    ASSERT_EQ(r.code, 0) << config << ": " << r.err;
    EXPECT_NE(r.out.find("trained 3 steps"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("eval: GAP"), std::string::npos) << r.out;
    EXPECT_EQ(ListDir(run + "/ckpt").size(), 1u);
    EXPECT_EQ(ListDir(run + "/tb").size(), 1u);
    fs::remove_all(run);
  }
}

// Synchronous data parallelism with two ranks as threads (inproc): twice the examples per step.
TEST_F(CommandsTest, TwoLocalRanks) {
  const std::string run = ScratchDir("two_ranks");
  auto args = Small("bilstm_audio", run, 4);
  args.insert(args.end(), {"--set", "trainer.local_ranks=2"});
  RunResult r = Reel(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("trained 4 steps (128 examples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(32 videos)"), std::string::npos) << r.out;  // both eval shards merged
  fs::remove_all(run);
}

// As a user runs them, from the repository root: the configs' own data paths (data/yt8m, the real
// shards inside the repository) must resolve with nothing beside the checkout.
TEST_F(CommandsTest, VideoLevelConfigsRunOnRealShardsFromTheRepositoryRoot) {
  for (const char* config : {"moe", "logistic"}) {
    const std::string run = ScratchDir(std::string("cfg_") + config);
    RunResult r = Reel({"train", "--config", std::string("configs/") + config + ".pbtxt", "--set",
                        "trainer.steps=2", "--set", "trainer.checkpoint_dir=" + run + "/c", "--set",
                        "trainer.metrics_log=" + run + "/m.jsonl", "--set",
                        "trainer.tensorboard_dir=" + run + "/tb"},
                       kRepo);
    ASSERT_EQ(r.code, 0) << config << ": " << r.err;
    EXPECT_NE(r.out.find("(313 videos)"), std::string::npos) << r.out;
    fs::remove_all(run);
  }
}

// Metrics computed here, independently of the core's accumulator, from `reel predict`'s
// probabilities for every class and the records' labels: GAP@k over the pooled top-k pairs
// divided by all positives, Hit@1, and PERR (precision of each video's top |labels|).
struct IndependentMetrics {
  double gap = 0, hit_at_1 = 0, perr = 0;
};
IndependentMetrics FromPredictions(const std::string& csv,
                                   const std::map<std::string, std::vector<int>>& labels, int k) {
  std::vector<std::pair<double, bool>> pooled;
  IndependentMetrics m;
  size_t positives = 0, videos = 0;
  std::istringstream lines(csv);
  std::string row;
  std::getline(lines, row);  // header
  while (std::getline(lines, row)) {
    const std::string id = row.substr(0, row.find(','));
    const std::vector<int>& truth = labels.at(id);
    std::istringstream pairs(row.substr(row.find(',') + 1));
    std::vector<std::pair<double, int>> ranked;  // (probability, class), best first as printed
    for (int cls; pairs >> cls;) {
      double p = 0;
      pairs >> p;
      ranked.emplace_back(p, cls);
    }
    auto is_true = [&](int cls) { return std::count(truth.begin(), truth.end(), cls) > 0; };
    for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(k); ++i)
      pooled.emplace_back(ranked[i].first, is_true(ranked[i].second));
    m.hit_at_1 += is_true(ranked[0].second) ? 1 : 0;
    size_t hits = 0;
    for (size_t i = 0; i < truth.size(); ++i) hits += is_true(ranked[i].second) ? 1 : 0;
    m.perr += static_cast<double>(hits) / static_cast<double>(truth.size());
    positives += truth.size();
    ++videos;
  }
  std::stable_sort(pooled.begin(), pooled.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  double tp = 0;
  for (size_t i = 0; i < pooled.size(); ++i)
    if (pooled[i].second) m.gap += ++tp / static_cast<double>(i + 1);
  m.gap /= static_cast<double>(positives);
  m.hit_at_1 /= static_cast<double>(videos);
  m.perr /= static_cast<double>(videos);
  return m;
}

TEST_F(CommandsTest, EvalPredictAndEnsembleOnACheckpoint) {
  const std::string run = ScratchDir("evalpredict");
  ASSERT_EQ(Reel(Small("two_stream", run, 4)).code, 0);
  const std::string data = *data_ + "/test/*.tfrecord";
  RunResult json = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", data, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(JsonField(json.out, "videos"), 32.0) << json.out;
  EXPECT_EQ(JsonField(json.out, "top_k"), 20.0) << json.out;

  // The same checkpoint's probabilities for all 16 classes, scored here: the metrics `eval`
  // reports must be these (up to the six printed decimals, which can reorder near-ties).
  RunResult all = Reel({"predict", "--checkpoint", run + "/ckpt", "--data", data, "--top-k", "16"});
  ASSERT_EQ(all.code, 0) << all.err;
  const auto labels = LabelsById(ListDir(*data_ + "/test"));
  ASSERT_EQ(labels.size(), 32u);
  for (int k : {20, 3}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    RunResult e = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", data, "--json", "--top-k",
                        std::to_string(k)});
    ASSERT_EQ(e.code, 0) << e.err;
    const IndependentMetrics want = FromPredictions(all.out, labels, k);
    EXPECT_NEAR(JsonField(e.out, "gap"), want.gap, 2e-3) << e.out;
    EXPECT_NEAR(JsonField(e.out, "hit_at_1"), want.hit_at_1, 1e-6) << e.out;
    EXPECT_NEAR(JsonField(e.out, "perr"), want.perr, 1e-6) << e.out;
  }

  RunResult table = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", data});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("GAP@20 "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("mAP"), std::string::npos);
  RunResult table5 = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", data, "--top-k", "5"});
  ASSERT_EQ(table5.code, 0) << table5.err;
  EXPECT_NE(table5.out.find("GAP@5 "), std::string::npos) << table5.out;
  EXPECT_EQ(table5.out.find("GAP@20"), std::string::npos) << table5.out;

  // An ensemble of a checkpoint with itself averages identical probabilities: same metrics.
  RunResult ens =
      Reel({"eval", "--ensemble", run + "/ckpt", run + "/ckpt", "--data", data, "--json"});
  ASSERT_EQ(ens.code, 0) << ens.err;
  EXPECT_NEAR(JsonField(ens.out, "gap"), JsonField(json.out, "gap"), 1e-6);

  RunResult pred = Reel({"predict", "--checkpoint", run + "/ckpt", "--data", data, "--top-k", "3"});
  ASSERT_EQ(pred.code, 0) << pred.err;
  std::istringstream lines(pred.out);
  std::string header, row;
  std::getline(lines, header);
  EXPECT_EQ(header, "VideoId,LabelConfidencePairs");
  int rows = 0;
  while (std::getline(lines, row)) {
    ++rows;
    std::istringstream pairs(row.substr(row.find(',') + 1));
    int n = 0;
    for (std::string tok; pairs >> tok;) ++n;
    EXPECT_EQ(n, 6) << row;  // three "class probability" pairs
  }
  EXPECT_EQ(rows, 32);
  fs::remove_all(run);
}

// --top-k and --batch-size must be positive integers, in `eval` as in `predict`; the usage says so.
TEST_F(CommandsTest, EvalAndPredictCheckTheirFlags) {
  const std::string run = ScratchDir("flags");
  ASSERT_EQ(Reel(Small("bilstm_audio", run, 1)).code, 0);
  const std::string data = *data_ + "/test/*.tfrecord";
  for (const char* command : {"eval", "predict"}) {
    for (const char* flag : {"--top-k", "--batch-size"}) {
      for (const char* value : {"0", "-3"}) {
        RunResult r = Reel({command, "--checkpoint", run + "/ckpt", "--data", data, flag, value});
        EXPECT_EQ(r.code, 1) << command << " " << flag << " " << value;
        EXPECT_NE(r.err.find(std::string("flag '") + flag + "' must be >= 1, got " + value),
                  std::string::npos)
            << r.err;
        EXPECT_NE(r.err.find(std::string("usage: reel ") + command), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("[--top-k 20] [--batch-size 64]"), std::string::npos) << r.err;
      }
    }
  }
  fs::remove_all(run);
}

TEST_F(CommandsTest, UnregisteredComponentListsRegisteredOnes) {
  RunResult r = RefusedRun("two_stream", {"model.name=no_such_model"});
  EXPECT_NE(r.err.find("no_such_model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("two_stream"), std::string::npos) << r.err;  // the list of registered ones
}

// A usage line follows a usage error, not a problem the run found in the config or the data.
TEST_F(CommandsTest, UsageFollowsOnlyUsageErrors) {
  RunResult r = RefusedRun("bilstm_audio", {"trainer.num_classes=0"});
  EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("num_classes': 0 is below 1"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("usage:"), std::string::npos) << r.err;
  RunResult flag = Reel({"train", "--config", kRepo + "/configs/logistic.pbtxt", "--bogus"});
  EXPECT_EQ(flag.code, 1);
  EXPECT_NE(flag.err.find("unknown flag '--bogus'"), std::string::npos) << flag.err;
  EXPECT_NE(flag.err.find("usage: reel train --config"), std::string::npos) << flag.err;
}

// A transport option out of range stops the run before it connects, naming the transport once.
TEST_F(CommandsTest, ABadTransportOptionIsNamedOnce) {
  RunResult r =
      RefusedRun("bilstm_audio", {"transport.name=tcp", "transport.options.heartbeat_ms=0"});
  const std::string said = "transport 'tcp': tcp option 'heartbeat_ms': 0 ms is below the minimum";
  EXPECT_NE(r.err.find(said), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("transport 'tcp': transport 'tcp'"), std::string::npos) << r.err;
}

// The sync optimizer's compression (docs/distributed.md, "Compression on the wire"): a word
// outside its values is refused before anything is written, naming the option and the values; two
// ranks train with the gradient in bf16 on the wire.
TEST_F(CommandsTest, CompressionOnTheWire) {
  RunResult r = RefusedRun("bilstm_audio", {"optimizer.options.compression=fp8"});
  EXPECT_NE(r.err.find("option 'compression': 'fp8' is not one of none, bf16, fp16"),
            std::string::npos)
      << r.err;
  r = RefusedRun("bilstm_audio", {"optimizer.options.error_feedback=maybe"});
  EXPECT_NE(r.err.find("error_feedback"), std::string::npos) << r.err;
  const std::string run = ScratchDir("compressed");
  auto args = Small("bilstm_audio", run, 4);
  args.insert(args.end(),
              {"--set", "trainer.local_ranks=2", "--set", "optimizer.options.compression=bf16",
               "--set", "optimizer.options.error_feedback=true"});
  r = Reel(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("trained 4 steps (128 examples"), std::string::npos) << r.out;
  fs::remove_all(run);
}

TEST_F(CommandsTest, PatternMatchingNoFileIsAClearError) {
  const std::string run = ScratchDir("nofile");
  ASSERT_EQ(Reel(Small("bilstm_audio", run, 1)).code, 0);
  RunResult r = Reel({"eval", "--checkpoint", run + "/ckpt", "--data", run + "/none/*.tfrecord"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("matches no file"), std::string::npos) << r.err;
  auto args = Small("bilstm_audio", run, 1);
  args.insert(args.end(), {"--set", "data.options.files=" + run + "/none/*.tfrecord"});
  RunResult t = Reel(args);
  EXPECT_EQ(t.code, 1);
  EXPECT_NE(t.err.find(run + "/none/*.tfrecord"), std::string::npos) << t.err;
  fs::remove_all(run);
}

TEST_F(CommandsTest, CheckpointOfAnotherModelIsRefusedAndKept) {
  const std::string run = ScratchDir("othermodel");
  ASSERT_EQ(Reel(Small("bilstm_audio", run, 2)).code, 0);
  auto before = ListDir(run + "/ckpt");
  ASSERT_EQ(before.size(), 1u);
  const std::string bytes = ReadFile(before[0]);
  auto args = Small("bilstm_video", run, 4);
  args.push_back("--resume");
  RunResult r = Reel(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds model 'bilstm_audio', not 'bilstm_video'"), std::string::npos)
      << r.err;
  EXPECT_EQ(ListDir(run + "/ckpt"), before);
  EXPECT_EQ(ReadFile(before[0]), bytes);
  fs::remove_all(run);
}

// trainer.precision (docs/training.md): on a CPU without bf16 kernels (simulated with oneDNN's
// own DNNL_MAX_CPU_ISA cap) "bf16" is refused before training, naming the field and the way out,
// "auto" trains in fp32 and says why, and another word is refused.
TEST_F(CommandsTest, PrecisionOnACpuWithoutBf16) {
  ::setenv("DNNL_MAX_CPU_ISA", "AVX512_CORE", 1);
  RunResult bf16 = RefusedRun("bilstm_audio", {"trainer.precision=bf16"});
  EXPECT_NE(bf16.err.find("trainer.precision: \"bf16\" needs a CPU with AVX-512 BF16"),
            std::string::npos)
      << bf16.err;
  EXPECT_NE(bf16.err.find("DNNL_MAX_CPU_ISA=AVX512_CORE"), std::string::npos) << bf16.err;
  const std::string run = ScratchDir("precision_auto");
  auto args = Small("bilstm_audio", run, 2);
  args.insert(args.end(), {"--set", "trainer.precision=auto"});
  RunResult r = Reel(args);
  ::unsetenv("DNNL_MAX_CPU_ISA");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("precision fp32 (auto: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("has no AVX-512 BF16 or AMX"), std::string::npos) << r.err;
  EXPECT_EQ(ListDir(run + "/ckpt").size(), 1u);
  fs::remove_all(run);
  RunResult word = RefusedRun("bilstm_audio", {"trainer.precision=fp16"});
  EXPECT_NE(word.err.find("expected \"fp32\", \"bf16\" or \"auto\", got \"fp16\""),
            std::string::npos)
      << word.err;
}

// Checkpoints hold float parameters whatever the precision: a bf16 run resumes in fp32 and back,
// and `reel eval` reads a bf16 run's checkpoint.
TEST_F(CommandsTest, ACheckpointResumesInTheOtherPrecision) {
  if (!ReadCpuBf16Features().avx512_bf16) {
    GTEST_SKIP() << "this CPU has no AVX-512 BF16, so a bf16 run is refused here";
  }
  const std::string run = ScratchDir("precision_resume");
  const char* order[] = {"bf16", "fp32", "bf16"};
  for (int i = 0; i < 3; ++i) {
    auto args = Small("two_stream", run, 2 * (i + 1));
    args.insert(args.end(), {"--set", std::string("trainer.precision=") + order[i]});
    if (i > 0) args.push_back("--resume");
    RunResult r = Reel(args);
    ASSERT_EQ(r.code, 0) << order[i] << ": " << r.err;
    if (i > 0) {
      EXPECT_NE(r.err.find("at step " + std::to_string(2 * i)), std::string::npos) << r.err;
    }
    EXPECT_NE(r.out.find("trained " + std::to_string(2 * (i + 1)) + " steps"), std::string::npos)
        << r.out;
  }
  RunResult e =
      Reel({"eval", "--checkpoint", run + "/ckpt", "--data", *data_ + "/test/*.tfrecord"});
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("GAP"), std::string::npos) << e.out;
  fs::remove_all(run);
}

TEST_F(CommandsTest, CorruptCheckpointIsDataLossAndKept) {
  const std::string run = ScratchDir("corrupt");
  ASSERT_EQ(Reel(Small("bilstm_audio", run, 2)).code, 0);
  auto files = ListDir(run + "/ckpt");
  ASSERT_EQ(files.size(), 1u);
  std::string bytes = ReadFile(files[0]);
  bytes[bytes.size() / 2] ^= 0x20;
  WriteFile(files[0], bytes);
  RunResult e =
      Reel({"eval", "--checkpoint", run + "/ckpt", "--data", *data_ + "/test/*.tfrecord"});
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("DATA_LOSS"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("checksum mismatch"), std::string::npos) << e.err;
  auto args = Small("bilstm_audio", run, 4);
  args.push_back("--resume");
  RunResult t = Reel(args);
  EXPECT_EQ(t.code, 1);
  EXPECT_NE(t.err.find(files[0]), std::string::npos) << t.err;
  EXPECT_EQ(ListDir(run + "/ckpt"), files);
  EXPECT_EQ(ReadFile(files[0]), bytes);
  fs::remove_all(run);
}

// Starts `reel train` in the background, sends `sig` once it has logged a few steps, and checks
// the final checkpoint and the exit status of an interrupted command; then --resume finishes the
// budget. SIGTERM (what Slurm, Kubernetes, mpirun and `timeout` send) must save the run like
// Ctrl-C.
void InterruptWritesACheckpointAndResumeFinishes(
    int sig, const std::function<std::vector<std::string>(const std::string&, int)>& small) {
  const std::string run = ScratchDir(std::string("signal") + std::to_string(sig));
  auto args = small(run, 1000000);
  std::vector<std::string> argv_s = {REEL_EXE};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    FILE* devnull = std::freopen("/dev/null", "w", stdout);
    (void)devnull;
    ::execv(REEL_EXE, argv.data());
    ::_exit(127);
  }
  // Wait (up to a generous limit, not a timing assertion) for three logged steps.
  for (int i = 0; i < 6000; ++i) {
    std::string log = ReadFile(run + "/metrics.jsonl");
    if (std::count(log.begin(), log.end(), '\n') >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, sig);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  auto files = ListDir(run + "/ckpt");
  ASSERT_EQ(files.size(), 1u);
  const std::string name = fs::path(files[0]).filename().string();
  const long step = std::stol(name.substr(5, 10));
  EXPECT_GE(step, 3);

  auto resume = small(run, static_cast<int>(step) + 2);
  resume.push_back("--resume");
  RunResult r = Reel(resume);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("resumed from " + files[0]), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("trained " + std::to_string(step + 2) + " steps"), std::string::npos)
      << r.out;
  // Resumed again with the same budget: nothing is trained, and no loss of 0 is made up.
  RunResult again = Reel(resume);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("nothing left to train: the checkpoint had reached the budget (" +
                           std::to_string(step + 2) + " steps"),
            std::string::npos)
      << again.out;
  EXPECT_EQ(again.out.find("final loss"), std::string::npos) << again.out;
  fs::remove_all(run);
}

TEST_F(CommandsTest, SigintWritesACheckpointAndResumeFinishes) {
  InterruptWritesACheckpointAndResumeFinishes(
      SIGINT, [](const std::string& run, int steps) { return Small("bilstm_audio", run, steps); });
}

TEST_F(CommandsTest, SigtermWritesACheckpointAndResumeFinishes) {
  InterruptWritesACheckpointAndResumeFinishes(
      SIGTERM, [](const std::string& run, int steps) { return Small("bilstm_audio", run, steps); });
}

// The writes `reel ARGS...` makes to stderr, one string each: stderr is one end of a
// SOCK_SEQPACKET socket pair, which keeps every write a message of its own.
std::vector<std::string> StderrWrites(const std::vector<std::string>& args, int* code) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return {};
  std::vector<std::string> argv_s = {REEL_EXE};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::dup2(pair[1], 2);
    FILE* devnull = std::freopen("/dev/null", "w", stdout);
    (void)devnull;
    ::execv(REEL_EXE, argv.data());
    ::_exit(127);
  }
  ::close(pair[1]);
  std::vector<std::string> writes;
  std::string buf(1 << 16, '\0');
  for (ssize_t n; (n = ::recv(pair[0], buf.data(), buf.size(), 0)) > 0;)
    writes.emplace_back(buf.data(), static_cast<size_t>(n));
  ::close(pair[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return writes;
}

// mpirun and srun merge the ranks' stderr write by write, so a line written in pieces could get
// another rank's words in the middle ("reel: reel: started by ..."): every line is one write.
TEST_F(CommandsTest, StderrLinesAreWrittenWhole) {
  const std::string run = ScratchDir("whole_lines");
  int code = -1;
  std::vector<std::string> writes = StderrWrites(Small("bilstm_audio", run, 3), &code);
  ASSERT_EQ(code, 0);
  size_t progress_lines = 0;
  for (const std::string& w : writes) {
    EXPECT_EQ(w.back(), '\n') << "a piece of a line: '" << w << "'";
    if (w.rfind("epoch 0  step ", 0) == 0) ++progress_lines;
  }
  EXPECT_EQ(progress_lines, 3u);  // log_every_steps=1

  writes = StderrWrites({"train", "--config", run + "/missing.pbtxt"}, &code);
  EXPECT_EQ(code, 1);
  ASSERT_FALSE(writes.empty());
  EXPECT_EQ(writes.front().rfind("reel train: ", 0), 0u) << writes.front();
  EXPECT_NE(writes.front().find("missing.pbtxt"), std::string::npos) << writes.front();
  for (const std::string& w : writes) EXPECT_EQ(w.back(), '\n') << "a piece: '" << w << "'";
  fs::remove_all(run);
}

}  // namespace
}  // namespace reel::e2e
