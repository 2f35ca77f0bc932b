// Training jobs end to end through the registry, with test components registered like a plugin's:
// ranks as threads, N processes x M local ranks (each simulated process a thread with its own
// environment), the registry's default transport and optimizer, timeouts from the transport
// section (a rank that stops answering is an error naming it), and the data-parallel equivalence:
// N ranks with batch B end with the parameters of one rank with batch N*B.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <omp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "comm/fake_environment.h"
#include "reel/core/checkpoint.h"
#include "reel/core/train_job.h"
#include "train/testing.h"
#include "train/thread_budget.h"

namespace reel::core {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Sources alive in this process. A source told to stall waits until it is the last one, i.e.
// until every other rank has given up and destroyed its components: a rank that stops answering,
// without any sleep.
std::mutex live_mu;
std::condition_variable live_cv;
int live_sources = 0;  // guarded by live_mu

class JobSource final : public DataSource {
 public:
  JobSource(const Options& o, const DataSourceContext& ctx)
      : tiny_(static_cast<int>(o.GetInt("videos")), static_cast<int>(o.GetInt("dim")),
              static_cast<int>(o.GetInt("num_classes")), static_cast<int>(o.GetInt("batch_size")),
              ctx.seed, ctx.shard, o.GetBool("shuffle")),
        rank_(ctx.shard.rank),
        stall_rank_(static_cast<int>(o.GetInt("stall_rank"))),
        fail_rank_(static_cast<int>(o.GetInt("fail_rank"))) {
    std::lock_guard<std::mutex> lock(live_mu);
    ++live_sources;
  }
  ~JobSource() override {
    {
      std::lock_guard<std::mutex> lock(live_mu);
      --live_sources;
    }
    live_cv.notify_all();
  }
  Result<Batch> Next() override {
    if (++batches_ == 3 && rank_ == stall_rank_) {
      std::unique_lock<std::mutex> lock(live_mu);
      live_cv.wait(lock, [] { return live_sources == 1; });
    }
    if (batches_ == 3 && rank_ == fail_rank_)
      return DataLossError("job source: rank " + std::to_string(rank_) + " fails on purpose");
    return tiny_.Next();
  }
  Status StartEpoch(int64_t epoch) override { return tiny_.StartEpoch(epoch); }
  Result<std::string> Position() const override { return tiny_.Position(); }
  Status Restore(std::string_view p) override { return tiny_.Restore(p); }

 private:
  testing::TinySource tiny_;
  const int rank_, stall_rank_, fail_rank_;
  int batches_ = 0;
};

constexpr int kDim = 5;

// What each rank's model was given (ModelContext::threads) and the OpenMP team its first
// Forward() ran with.
struct ThreadsSeen {
  int given = -1, team = -1;
};
std::mutex seen_mu;
std::vector<ThreadsSeen> threads_seen;  // guarded by seen_mu, in the order the models were made

class ThreadsProbe final : public testing::TinyModel {
 public:
  ThreadsProbe(int dim, int classes, size_t slot) : TinyModel(dim, classes), slot_(slot) {}
  Result<Tensor> Forward(const Batch& batch, Mode mode) override {
    {
      std::lock_guard<std::mutex> lock(seen_mu);
      if (threads_seen[slot_].team < 0) threads_seen[slot_].team = omp_get_max_threads();
    }
    return TinyModel::Forward(batch, mode);
  }

 private:
  const size_t slot_;
};

Status RegisterTestComponents(Registrar& r) {
  REEL_RETURN_IF_ERROR(r.Add<DataSource>(
      {"job_source",
       "TinySource with faults on request",
       {IntOption("videos", 240, ""), IntOption("dim", kDim, ""), IntOption("num_classes", 6, ""),
        IntOption("batch_size", 4, ""), BoolOption("shuffle", true, ""),
        IntOption("stall_rank", -1, "this rank stops answering at its third batch"),
        IntOption("fail_rank", -1, "this rank fails at its third batch")}},
      [](const Options& o, const DataSourceContext& ctx) -> Result<std::unique_ptr<DataSource>> {
        return std::unique_ptr<DataSource>(new JobSource(o, ctx));
      }));
  REEL_RETURN_IF_ERROR(r.Add<Model>(
      {"threads_probe", "TinyModel noting its threads", {IntOption("dim", kDim, "")}},
      [](const Options& o, const ModelContext& ctx) -> Result<std::unique_ptr<Model>> {
        std::lock_guard<std::mutex> lock(seen_mu);
        threads_seen.push_back({ctx.threads, -1});
        return std::unique_ptr<Model>(new ThreadsProbe(
            o.GetInt("dim"), static_cast<int>(ctx.num_classes), threads_seen.size() - 1));
      }));
  return r.Add<Model>(
      {"tiny_linear", "TinyModel", {IntOption("dim", kDim, "")}},
      [](const Options& o, const ModelContext& ctx) -> Result<std::unique_ptr<Model>> {
        return std::unique_ptr<Model>(
            new testing::TinyModel(o.GetInt("dim"), static_cast<int>(ctx.num_classes)));
      });
}

std::unique_ptr<Host> MakeJobHost() {
  HostOptions options;
  options.load_plugins = false;
  auto host = std::move(Host::Create(options).value());
  EXPECT_TRUE(host->registry()
                  .RegisterFrom("job_test", "", nullptr,
                                [](Registrar& r) noexcept { return RegisterTestComponents(r); })
                  .ok());
  return host;
}

// A loopback port that was free a moment ago.
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A fresh directory for one job's checkpoints, removed with the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("reel-job-test-" + std::to_string(getpid()) + "-" + name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  operator std::string() const { return path_.string(); }  // NOLINT: reads as the path it is

 private:
  std::filesystem::path path_;
};

ConfigFile Config(const std::string& text) {
  auto cfg = ParseConfig(text, "job.pbtxt");
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  return cfg.ok() ? std::move(*cfg) : ConfigFile{};
}

// `extra` goes inside the trainer section; `sections` after it.
std::string Text(const std::string& trainer, const std::string& data_options = "",
                 const std::string& sections = "") {
  return "data { name: \"job_source\" " + data_options +
         " }\nmodel { name: \"tiny_linear\" }\ntrainer { num_classes: 6 learning_rate { base: "
         "0.2 } log_every_steps: 2 " +
         trainer + " }\n" + sections;
}

// A job in a process whose launcher set `env` (nothing by default).
Result<TrainResult> Train(Host& host, const std::string& text,
                          std::map<std::string, std::string> env = {}) {
  TrainJobOptions job;
  job.env = testing::FakeEnvironment(std::move(env));
  return RunTrainJob(host, Config(text), job);
}

TEST(TrainJob, RanksAsThreadsThroughTheRegistryDefaults) {
  auto host = MakeJobHost();
  EXPECT_EQ(host->registry().DefaultName(ComponentKind::kTransport), "inproc");
  EXPECT_EQ(host->registry().DefaultName(ComponentKind::kOptimizer), "sync");
  EXPECT_EQ(host->registry().DefaultName(ComponentKind::kModel), "");
  auto r = Train(*host, Text("steps: 6 batch_size: 4 local_ranks: 3"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 6);
  EXPECT_EQ(r->examples, 6 * 4 * 3);
}

// Ranks that share a host divide its cores (train/thread_budget.h): each rank's model is told its
// share and runs on an OpenMP team of that size, and the run says so first.
TEST(TrainJob, RanksOnOneHostShareItsCores) {
  auto host = MakeJobHost();
  auto probed = [](std::string text) {
    return text.replace(text.find("tiny_linear"), 11, "threads_probe");
  };
  const int share = std::max(1, CoresAvailable() / 4);  // 2 launched processes x 2 ranks
  {
    std::lock_guard<std::mutex> lock(seen_mu);
    threads_seen.clear();
  }
  std::ostringstream progress;
  TrainJobOptions job;
  job.env = testing::FakeEnvironment({{"REEL_LOCAL_WORLD_SIZE", "2"}});
  job.progress = &progress;
  auto r = RunTrainJob(*host, Config(probed(Text("steps: 2 batch_size: 4 local_ranks: 2"))), job);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(progress.str(),
              HasSubstr("reel: 4 ranks share this process's " + std::to_string(CoresAvailable()) +
                        " core(s) (REEL_LOCAL_WORLD_SIZE=2, 2 in this process): " +
                        std::to_string(share) + " compute thread(s) per rank"));
  {
    std::lock_guard<std::mutex> lock(seen_mu);
    ASSERT_EQ(threads_seen.size(), 2u);
    for (const ThreadsSeen& seen : threads_seen) {
      EXPECT_EQ(seen.given, share);
      EXPECT_EQ(seen.team, share);
    }
    threads_seen.clear();
  }
  // OMP_NUM_THREADS is the user's: nothing is divided, nothing said.
  std::ostringstream quiet;
  job.env = testing::FakeEnvironment({{"REEL_LOCAL_WORLD_SIZE", "2"}, {"OMP_NUM_THREADS", "3"}});
  job.progress = &quiet;
  auto u = RunTrainJob(*host, Config(probed(Text("steps: 2 batch_size: 4 local_ranks: 2"))), job);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_THAT(quiet.str(), Not(HasSubstr("compute thread")));
  std::lock_guard<std::mutex> lock(seen_mu);
  ASSERT_EQ(threads_seen.size(), 2u);
  for (const ThreadsSeen& seen : threads_seen) EXPECT_EQ(seen.given, 0);
  threads_seen.clear();
}

TEST(TrainJob, AProcessCountThatIsNotANumberIsRefusedBeforeTraining) {
  auto host = MakeJobHost();
  auto r = Train(*host, Text("steps: 2 batch_size: 4"), {{"REEL_LOCAL_WORLD_SIZE", "two"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("REEL_LOCAL_WORLD_SIZE"));
}

TEST(TrainJob, ARankThatStopsAnsweringIsAnErrorNamingItWithinTheTimeout) {
  auto host = MakeJobHost();
  // Rank 1 stalls until rank 0 has given up; with the default timeout (minutes) this test would
  // outlast CTest's, so passing proves the transport section's timeout reaches the trainer.
  auto r = Train(*host, Text("steps: 20 batch_size: 4 local_ranks: 2",
                             "options { key: \"stall_rank\" value: \"1\" }",
                             "transport { name: \"inproc\" options { key: \"world\" value: "
                             "\"stall\" } timeout_seconds: 0.2 }"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), StartsWith("rank 0: "));
  EXPECT_THAT(r.status().message(), HasSubstr("from rank 1"));
}

TEST(TrainJob, ARankThatFailsIsTheReportedCauseNotItsPeersLoss) {
  auto host = MakeJobHost();
  auto r = Train(*host, Text("steps: 20 batch_size: 4 local_ranks: 3",
                             "options { key: \"fail_rank\" value: \"2\" }"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status();
  EXPECT_THAT(r.status().message(), StartsWith("rank 2: "));
}

TEST(TrainJob, UnderMpirunWithoutATransportSectionItUsesMpiAndSaysSoFirst) {
  auto host = MakeJobHost();  // no mpi plugin loaded here: the choice shows in the error
  std::ostringstream progress;
  TrainJobOptions job;
  job.env = testing::FakeEnvironment({{"OMPI_COMM_WORLD_RANK", "0"}});
  job.progress = &progress;
  auto r = RunTrainJob(*host, Config(Text("steps: 2")), job);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("no transport named 'mpi'"));
  EXPECT_THAT(progress.str(), StartsWith("reel: started by an MPI launcher (OMPI_COMM_WORLD_RANK "
                                         "is set) and the config names no transport"));
}

TEST(TrainJob, MalformedLauncherVariablesAndTimeoutsAreRefusedNamingThem) {
  auto host = MakeJobHost();
  TrainJobOptions job;
  job.env = testing::FakeEnvironment({{"REEL_RANK", "abc"}, {"REEL_WORLD_SIZE", "2"}});
  auto r = RunTrainJob(*host, Config(Text("steps: 2")), job);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("REEL_RANK=\"abc\""));
  job.env = testing::FakeEnvironment({});
  auto t = RunTrainJob(
      *host, Config(Text("steps: 2", "", "transport { name: \"inproc\" timeout_seconds: -1 }")),
      job);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status();
  EXPECT_THAT(t.status().message(), HasSubstr("transport.timeout_seconds=-1"));
}

TEST(TrainJob, ASingleProcessJobIsAWorldOfOneWhateverTheLauncherSays) {
  auto host = MakeJobHost();
  TrainJobOptions job;
  job.single_process = true;  // as a trial of `reel tune` inside a launched worker
  job.env = testing::FakeEnvironment(
      {{"REEL_RANK", "1"}, {"REEL_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}});
  auto r = RunTrainJob(
      *host,
      Config(Text("steps: 3 batch_size: 4 local_ranks: 3", "", "transport { name: \"inproc\" }")),
      job);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->examples, 3 * 4);
}

// ---- Synchronous data parallelism: N ranks with batch B equal one rank with batch N*B. ----

std::vector<float> FinalParams(Host& host, const std::string& dir) {
  auto state = LoadCheckpoint(host, dir);
  EXPECT_TRUE(state.ok()) << state.status();
  std::vector<float> out;
  if (state.ok())
    for (const auto& b : state->params) out.insert(out.end(), b.values.begin(), b.values.end());
  return out;
}

// Unshuffled, rank r reads videos r, r+N, ...: the union of the ranks' k-th batches is the single
// rank's k-th batch. `clip_norm` 0 turns clipping off.
std::string InprocWorld(const std::string& world) {
  return "transport { name: \"inproc\" options { key: \"world\" value: \"" + world + "\" } }";
}

// Below the gradient norm of every step of these jobs (0.8 to 1.6, measured once):
// with it the clip changes every update.
constexpr double kBindingClip = 0.1;

std::string EquivalenceConfig(int batch, int local_ranks, const std::string& dir,
                              const std::string& transport, double clip_norm = 0) {
  return Text("steps: 6 clip_norm: " + std::to_string(clip_norm) + " checkpoint_dir: \"" + dir +
                  "\" batch_size: " + std::to_string(batch) +
                  " local_ranks: " + std::to_string(local_ranks),
              "options { key: \"shuffle\" value: \"false\" }",
              transport +
                  "\noptimizer { name: \"sync\" options { key: \"rule\" value: \"momentum\" "
                  "} }\neval_data { name: \"job_source\" options { key: \"videos\" value: \"60\" } "
                  "options { key: \"shuffle\" value: \"false\" } }");
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::abs(want[i])) << "parameter " << i;
}

// The metrics of several ranks are merged over all of them: the same as one rank's.
void ExpectSameMetrics(const TrainResult& got, const TrainResult& want) {
  EXPECT_NEAR(got.last_loss, want.last_loss, 1e-5);
  ASSERT_TRUE(got.final_eval.has_value() && want.final_eval.has_value());
  EXPECT_EQ(got.final_eval->videos, want.final_eval->videos);
  EXPECT_NEAR(got.final_eval->gap, want.final_eval->gap, 1e-4);
  EXPECT_NEAR(got.final_eval->map, want.final_eval->map, 1e-4);
}

TEST(TrainJob, FourThreadRanksEqualOneRankWithFourTimesTheBatch) {
  auto host = MakeJobHost();
  const TempDir one("one"), four("four");
  auto single = Train(*host, EquivalenceConfig(8, 1, one, InprocWorld("eq-one")));
  ASSERT_TRUE(single.ok()) << single.status();
  auto ranks = Train(*host, EquivalenceConfig(2, 4, four, InprocWorld("eq-four")));
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ExpectClose(FinalParams(*host, four), FinalParams(*host, one));
  ExpectSameMetrics(*ranks, *single);
  EXPECT_EQ(single->final_eval->videos, 60);
}

// The clip acts on the gradient averaged over the ranks (inside "sync", after the allreduce), not
// on each rank's own: clipping every rank's gradient first would average four clipped vectors,
// which is not the clipped gradient of the whole batch.
TEST(TrainJob, FourThreadRanksWithABindingClipEqualOneRankWithFourTimesTheBatch) {
  auto host = MakeJobHost();
  const TempDir one("clip-one"), four("clip-four"), free("clip-free");
  auto single = Train(*host, EquivalenceConfig(8, 1, one, InprocWorld("clip-one"), kBindingClip));
  ASSERT_TRUE(single.ok()) << single.status();
  auto unclipped = Train(*host, EquivalenceConfig(8, 1, free, InprocWorld("clip-free")));
  ASSERT_TRUE(unclipped.ok()) << unclipped.status();
  // The clip binds: without it the same job ends elsewhere.
  const std::vector<float> clipped = FinalParams(*host, one),
                           not_clipped = FinalParams(*host, free);
  ASSERT_EQ(clipped.size(), not_clipped.size());
  double moved = 0;
  for (size_t i = 0; i < clipped.size(); ++i)
    moved = std::max(moved, static_cast<double>(std::abs(clipped[i] - not_clipped[i])));
  EXPECT_GT(moved, 1e-2);
  auto ranks = Train(*host, EquivalenceConfig(2, 4, four, InprocWorld("clip-four"), kBindingClip));
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ExpectClose(FinalParams(*host, four), clipped);
  ExpectSameMetrics(*ranks, *single);
}

TEST(TrainJob, TwoProcessesOfTwoLocalRanksEqualOneRankWithFourTimesTheBatch) {
  auto host = MakeJobHost();
  const TempDir one("nxm-one"), grid("nxm-grid");
  auto single = Train(*host, EquivalenceConfig(8, 1, one, InprocWorld("nxm-one")));
  ASSERT_TRUE(single.ok()) << single.status();
  // Process p runs ranks 2p and 2p+1 of 4; both "processes" join one inproc world.
  std::vector<Result<TrainResult>> results(2, InternalError("not run"));
  std::vector<std::thread> processes;
  for (int p = 0; p < 2; ++p)
    processes.emplace_back([&, p] {
      TrainJobOptions mine;
      mine.env =
          testing::FakeEnvironment({{"REEL_RANK", std::to_string(p)}, {"REEL_WORLD_SIZE", "2"}});
      results[static_cast<size_t>(p)] =
          RunTrainJob(*host, Config(EquivalenceConfig(2, 2, grid, InprocWorld("nxm-grid"))), mine);
    });
  for (auto& t : processes) t.join();
  for (auto& r : results) ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(results[0]->examples, 6 * 8);
  ExpectClose(FinalParams(*host, grid), FinalParams(*host, one));
  ExpectSameMetrics(*results[1], *single);
}

// The same over the tcp plugin (real sockets on loopback), when this build has it: two
// processes of two local ranks each, every simulated process with its own environment, with a
// clip that binds.
TEST(TrainJob, TwoProcessesOverTcpEqualOneRankWithFourTimesTheBatch) {
  const std::string plugins = std::string(REEL_BINARY_DIR) + "/lib/reel/plugins";
  if (!std::filesystem::exists(plugins + "/libreel_tcp.so"))
    GTEST_SKIP() << "the tcp plugin is not built in " << plugins;
  HostOptions options;
  options.plugin_dirs = {plugins};
  auto host = std::move(Host::Create(options).value());
  ASSERT_NE(host->registry().Find(ComponentKind::kTransport, "tcp"), nullptr);
  ASSERT_TRUE(host->registry()
                  .RegisterFrom("job_test", "", nullptr,
                                [](Registrar& r) noexcept { return RegisterTestComponents(r); })
                  .ok());
  const TempDir one("tcp-one"), grid("tcp-grid");
  auto single = Train(*host, EquivalenceConfig(8, 1, one, InprocWorld("tcp-one"), kBindingClip));
  ASSERT_TRUE(single.ok()) << single.status();
  const std::string coordinator = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  std::vector<Result<TrainResult>> results(2, InternalError("not run"));
  std::vector<std::thread> processes;
  for (int p = 0; p < 2; ++p)
    processes.emplace_back([&, p] {
      results[static_cast<size_t>(p)] =
          Train(*host, EquivalenceConfig(2, 2, grid, "transport { name: \"tcp\" }", kBindingClip),
                {{"REEL_RANK", std::to_string(p)},
                 {"REEL_WORLD_SIZE", "2"},
                 {"REEL_COORDINATOR", coordinator}});
    });
  for (auto& t : processes) t.join();
  for (auto& r : results) ASSERT_TRUE(r.ok()) << r.status();
  ExpectClose(FinalParams(*host, grid), FinalParams(*host, one));
  ExpectSameMetrics(*results[1], *single);
}

}  // namespace
}  // namespace reel::core
