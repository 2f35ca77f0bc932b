// Fault injection around checkpoints, on the real file storage: the process killed (SIGKILL) at
// several points of a checkpoint write and at random moments of a stream of writes, a write that
// fails because the disk is full (injected, and a real full tmpfs when the test runs as root).
// In every case the previous checkpoint loads, nothing half-written is ever listed as a
// checkpoint, and `--resume` ends exactly where an uninterrupted run ends.
#include <gmock/gmock.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/filesystem.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "reel/core/checkpoint.h"
#include "reel/core/host.h"
#include "train/fault_storage.h"
#include "train/tiny_run.h"

namespace reel::core {
namespace {

namespace fs = boost::filesystem;
using testing::FaultStorage;
using testing::TinyRank;
using testing::WriteFault;
using Kind = WriteFault::Kind;

std::unique_ptr<Host> FileHost() {
  HostOptions options;
  options.load_plugins = false;
  return std::move(Host::Create(options).value());
}

// Checkpoints every 4 steps, the newest 2 kept: the 3rd write is the checkpoint of step 12.
TrainerOptions CheckpointingOptions(const std::string& dir) {
  TrainerOptions o = testing::TinyTrainerOptions();
  o.checkpoint_dir = dir;
  o.checkpoint_every_steps = 4;
  o.keep_checkpoints = 2;
  return o;
}

std::vector<float> UninterruptedParams() {
  testing::MemStorage storage;
  TinyRank r(0, 1, 5);
  auto comm = testing::SoloCommunicator();
  EXPECT_TRUE(
      RunTrainer(testing::TinyTrainerOptions(), r.components(comm.get(), false), storage).ok());
  return r.params();
}

// Steps of the checkpoints listed in `dir`, each checked to decode completely.
std::vector<int64_t> DecodableSteps(StorageResolver& storage, const std::string& dir) {
  CheckpointManager manager(storage, dir, 0);
  auto listed = manager.List();
  EXPECT_TRUE(listed.ok()) << listed.status();
  std::vector<int64_t> steps;
  if (!listed.ok()) return steps;
  for (const auto& [step, uri] : *listed) {
    auto state = LoadCheckpoint(storage, uri);
    EXPECT_TRUE(state.ok()) << uri << ": " << state.status();
    if (state.ok()) {
      EXPECT_EQ(state->step, step) << uri;
    }
    steps.push_back(step);
  }
  return steps;
}

// Resumes from `dir` with healthy storage and checks the run ends where an uninterrupted one does.
void ExpectResumeCompletes(StorageResolver& storage, const std::string& dir) {
  TinyRank r(0, 1, 5);
  auto comm = testing::SoloCommunicator();
  TrainerOptions o = CheckpointingOptions(dir);
  o.resume = true;
  o.seed = 77;  // another init seed: the parameters must come from the checkpoint
  auto result = RunTrainer(o, r.components(comm.get(), false), storage);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->resumed);
  EXPECT_EQ(result->steps, 30);
  EXPECT_EQ(r.params(), UninterruptedParams());
}

// Trains `r` with `o` on `inner` through storage whose checkpoint writes number nth ..
// nth + count - 1 fail as on a full disk.
Result<TrainResult> TrainWithFullDisk(StorageResolver& inner, const TrainerOptions& o, TinyRank& r,
                                      int nth, int count = 1) {
  WriteFault full;
  full.kind = Kind::kFailAppend;
  full.nth = nth;
  full.count = count;
  FaultStorage faulty(inner, full);
  auto comm = testing::SoloCommunicator();
  return RunTrainer(o, r.components(comm.get(), false), faulty);
}

// The run stopped with the full disk's error naming the checkpoint of `step`.
void ExpectStoppedByFullDiskAt(const Result<TrainResult>& result, int64_t step) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr(CheckpointName(step)));
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("No space left on device"));
}

class CheckpointFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / fs::unique_path("reel-ckpt-fault-%%%%%%")).string();
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<Host> host_ = FileHost();
  std::string dir_;
};

class KillDuringCheckpointTest : public CheckpointFaultTest,
                                 public ::testing::WithParamInterface<WriteFault> {};

TEST_P(KillDuringCheckpointTest, PreviousCheckpointLoadsAndResumeCompletes) {
  const WriteFault fault = GetParam();
  EXPECT_EXIT(
      {
        FaultStorage faulty(*host_, fault);
        TinyRank r(0, 1, 5);
        auto comm = testing::SoloCommunicator();
        (void)RunTrainer(CheckpointingOptions(dir_), r.components(comm.get(), false), faulty);
        std::exit(0);  // not killed: the test fails
      },
      ::testing::KilledBySignal(SIGKILL), "");
  // Killed inside the write of step 12: steps 4 and 8 remain. Killed after it: 12 is complete
  // and the pruning of step 4 never ran.
  const std::vector<int64_t> want = fault.kind == Kind::kKillAfterClose
                                        ? std::vector<int64_t>{4, 8, 12}
                                        : std::vector<int64_t>{4, 8};
  EXPECT_EQ(DecodableSteps(*host_, dir_), want);
  // The half-written bytes are really on disk, under a temporary name no listing takes.
  if (fault.kind == Kind::kKillAtByte) {
    std::vector<uint64_t> temp_sizes;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().starts_with(CheckpointName(12) + ".tmp"))
        temp_sizes.push_back(fs::file_size(e.path()));
    EXPECT_EQ(temp_sizes, std::vector<uint64_t>{fault.at_byte});
  }
  ExpectResumeCompletes(*host_, dir_);
  // The resume wrote step 12 again, and that removed the killed writer's temporary file: only
  // the kept checkpoints remain.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
}

WriteFault Kill(Kind kind, const char* name, uint64_t at_byte = 0) {
  WriteFault f;
  f.kind = kind;
  f.nth = 3;
  f.at_byte = at_byte;
  f.name = name;
  return f;
}

INSTANTIATE_TEST_SUITE_P(Points, KillDuringCheckpointTest,
                         ::testing::Values(Kill(Kind::kKillAtByte, "BeforeTheFirstByte", 0),
                                           Kill(Kind::kKillAtByte, "AfterOneByte", 1),
                                           Kill(Kind::kKillAtByte, "InsideTheEnvelope", 9),
                                           Kill(Kind::kKillAtByte, "InsideTheParameters", 300),
                                           Kill(Kind::kKillAtByte, "NearTheEnd", 700),
                                           Kill(Kind::kKillBeforeClose, "AllBytesWrittenNotClosed"),
                                           Kill(Kind::kKillAfterClose, "RightAfterClose")),
                         [](const auto& info) { return info.param.name; });

// A child process writes checkpoints of about 1 MB in a loop (with pruning) and is killed with
// SIGKILL at random moments: inside a write, an fsync, the rename or a delete. After every kill
// each listed checkpoint decodes and the newest step never goes back. The kill moments are
// random (seeded); wherever they land, the assertions must hold.
TEST_F(CheckpointFaultTest, KilledAtRandomMomentsNeverLeavesAHalfCheckpoint) {
  std::mt19937 rng(15);
  std::uniform_int_distribution<int> delay_us(0, 30000);
  int64_t newest = 0;
  for (int round = 0; round < 12; ++round) {
    const int64_t first_step = newest + 1;
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      CheckpointManager manager(*host_, dir_, 2);
      CheckpointState s;
      s.model_name = "tiny";
      s.params.push_back({"w", {512, 512}, std::vector<float>(512 * 512, 0.25f)});
      for (int64_t step = first_step;; ++step) {
        s.step = step;
        if (!manager.Save(s).ok()) ::_exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer stopped by itself, status " << status;
    std::vector<int64_t> steps = DecodableSteps(*host_, dir_);
    if (!steps.empty()) {
      EXPECT_GE(steps.back(), newest) << "round " << round;
      newest = steps.back();
    }
  }
}

TEST_F(CheckpointFaultTest, InjectedDiskFullStopsTrainingAndKeepsThePreviousCheckpoint) {
  TinyRank r(0, 1, 5);
  ExpectStoppedByFullDiskAt(TrainWithFullDisk(*host_, CheckpointingOptions(dir_), r, 3), 12);
  EXPECT_EQ(DecodableSteps(*host_, dir_), (std::vector<int64_t>{4, 8}));
  // Nothing of the failed write stays behind (no temporary file either).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
  ExpectResumeCompletes(*host_, dir_);
}

// trainer.on_checkpoint_failure "continue": the failed periodic checkpoint is reported and counted,
// training goes on unchanged, the next checkpoints are written and pruned as usual.
TEST_F(CheckpointFaultTest, InjectedDiskFullWithContinueTrainsOnAndWritesTheNextCheckpoints) {
  TinyRank r(0, 1, 5);
  TrainerOptions o = CheckpointingOptions(dir_);
  o.on_checkpoint_failure = "continue";
  std::ostringstream progress;
  o.progress = &progress;
  auto result = TrainWithFullDisk(*host_, o, r, 3);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 30);
  EXPECT_EQ(result->checkpoint_failures, 1);
  EXPECT_THAT(result->last_checkpoint_error, ::testing::HasSubstr(CheckpointName(12)));
  EXPECT_THAT(result->last_checkpoint_error, ::testing::HasSubstr("No space left on device"));
  EXPECT_THAT(progress.str(), ::testing::HasSubstr("the checkpoint of step 12 was not written"));
  EXPECT_THAT(result->last_checkpoint, ::testing::HasSubstr(CheckpointName(30)));
  EXPECT_EQ(r.params(), UninterruptedParams());
  EXPECT_EQ(DecodableSteps(*host_, dir_), (std::vector<int64_t>{28, 30}));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
}

// A disk that stays full under "continue": every periodic checkpoint after step 8 fails, then the
// last checkpoint of the run fails too, and that stops the run with the error (nothing later
// could save the training); steps 4 and 8 are intact and a resume completes.
TEST_F(CheckpointFaultTest, DiskStaysFullWithContinueTheLastCheckpointStopsTheRun) {
  TinyRank r(0, 1, 5);
  TrainerOptions o = CheckpointingOptions(dir_);
  o.on_checkpoint_failure = "continue";
  ExpectStoppedByFullDiskAt(TrainWithFullDisk(*host_, o, r, 3, /*count=*/1000), 30);
  EXPECT_EQ(DecodableSteps(*host_, dir_), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
  ExpectResumeCompletes(*host_, dir_);
}

// The periodic checkpoint of the run's last step fails under "continue": the end of the run
// writes it again (it is the last one), with the final parameters.
TEST_F(CheckpointFaultTest, FailedCheckpointOfTheLastStepIsWrittenAtTheEnd) {
  TinyRank r(0, 1, 5);
  TrainerOptions o = CheckpointingOptions(dir_);
  o.steps = 28;
  o.on_checkpoint_failure = "continue";
  auto result = TrainWithFullDisk(*host_, o, r, 7);  // steps 4, 8, ..., 28: the last step's write
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->checkpoint_failures, 1);
  EXPECT_THAT(result->last_checkpoint, ::testing::HasSubstr(CheckpointName(28)));
  EXPECT_EQ(DecodableSteps(*host_, dir_), (std::vector<int64_t>{24, 28}));
  auto state = LoadCheckpoint(*host_, result->last_checkpoint);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->params.size(), r.arena.blocks().size());
  for (size_t i = 0; i < state->params.size(); ++i) {
    auto trained = r.arena.values(static_cast<ParamArena::BlockId>(i));
    EXPECT_EQ(state->params[i].values, std::vector<float>(trained.begin(), trained.end()))
        << state->params[i].name;
  }
}

// An unknown value is refused before anything is trained or written.
TEST_F(CheckpointFaultTest, UnknownOnCheckpointFailureIsRefusedBeforeTraining) {
  TinyRank r(0, 1, 5);
  auto comm = testing::SoloCommunicator();
  TrainerOptions o = CheckpointingOptions(dir_);
  o.on_checkpoint_failure = "retry";
  const std::vector<float> before = r.params();
  auto result = RunTrainer(o, r.components(comm.get(), false), *host_);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("on_checkpoint_failure"));
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("\"retry\""));
  EXPECT_EQ(r.params(), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0);
}

// The same with a real full disk: a 1 MiB tmpfs filled up after the checkpoint of step 8.
// Needs root (mount); skipped otherwise.
TEST_F(CheckpointFaultTest, RealFullTmpfsStopsTrainingAndKeepsThePreviousCheckpoint) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=1m") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs on " << dir_ << ": " << std::strerror(errno);
  struct Unmount {
    std::string dir;
    ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
  } unmount{dir_};
  const std::string ckpt = dir_ + "/ckpt";
  {
    TinyRank r(0, 1, 5);
    auto comm = testing::SoloCommunicator();
    TrainerOptions o = CheckpointingOptions(ckpt);
    o.should_stop = [](int64_t step) { return step >= 8; };
    ASSERT_TRUE(RunTrainer(o, r.components(comm.get(), false), *host_).ok());
  }
  ASSERT_EQ(DecodableSteps(*host_, ckpt), (std::vector<int64_t>{4, 8}));
  const std::string filler = dir_ + "/filler";
  {
    std::ofstream out(filler, std::ios::binary);
    const std::string block(4096, 'x');
    while (out.write(block.data(), block.size()) && out.flush()) {
    }
  }
  {
    TinyRank r(0, 1, 5);
    auto comm = testing::SoloCommunicator();
    TrainerOptions o = CheckpointingOptions(ckpt);
    o.resume = true;
    auto result = RunTrainer(o, r.components(comm.get(), false), *host_);
    ASSERT_FALSE(result.ok());
    EXPECT_THAT(result.status().message(), ::testing::HasSubstr(CheckpointName(12)));
    EXPECT_THAT(result.status().message(), ::testing::HasSubstr("No space left on device"));
  }
  EXPECT_EQ(DecodableSteps(*host_, ckpt), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(std::distance(fs::directory_iterator(ckpt), fs::directory_iterator()), 2);
  fs::remove(filler);
  ExpectResumeCompletes(*host_, ckpt);
}

}  // namespace
}  // namespace reel::core
