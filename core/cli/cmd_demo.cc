// `reel demo [--workdir DIR] [--set ...]`: synthetic frame-level data → two_stream → metrics.
// The README's main command: everything it needs is generated, so it runs on a fresh checkout.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "args.h"
#include "cli.h"
#include "train_cli.h"

namespace reel::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kClasses = 16;
// How long a rank waits for another rank of its host to write the demo's data (about 1 s here).
constexpr std::chrono::seconds kDataWait{600};

// Writes the data into `data_dir` (which must not exist yet). Train and test come from one
// `reel synth` run (one planted pattern per class), split by shard: the last of five shards
// becomes the held-out test set.
Status Synthesize(CliEnv& env, const fs::path& data_dir) {
  if (env.host.registry().Find(ComponentKind::kCommand, "synth") == nullptr)
    return NotFoundError(
        "the demo needs the `synth` command of the tfrecord plugin, which was "
        "not found (see `reel plugins`)");
  REEL_ASSIGN_OR_RETURN(auto synth, env.host.registry().CreateCommand("synth"));
  const fs::path train = data_dir / "train", test = data_dir / "test";
  CommandContext ctx{&env.host.storage(), &env.err, &env.err};
  REEL_RETURN_IF_ERROR(synth->Run({"--out",        train.string(),
                                   "--videos",     "1000",
                                   "--classes",    std::to_string(kClasses),
                                   "--level",      "frame",
                                   "--shards",     "5",
                                   "--seed",       "7",
                                   "--min-frames", "8",
                                   "--max-frames", "24",
                                   "--max-labels", "3",
                                   "--amplitude",  "0.1",
                                   "--noise",      "1.0"},
                                  ctx));
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(train)) shards.push_back(e.path());
  std::sort(shards.begin(), shards.end());
  if (shards.size() < 2)
    return InternalError("synth wrote " + std::to_string(shards.size()) + " shard(s) to " +
                         train.string());
  std::error_code ec;
  fs::create_directories(test, ec);
  if (!ec) fs::rename(shards.back(), test / shards.back().filename(), ec);
  if (ec)
    return InternalError("moving " + shards.back().string() + " to " + test.string() + ": " +
                         ec.message());
  return Status::Ok();
}

// Several ranks of one host (under `reel launch`, mpirun, srun) may share the work directory:
// the first to take the lock writes the data beside `data/` and renames it into place, the
// others wait for the lock and find it there. The lock goes with its holder's process, so a rank
// killed while writing leaves only a partial folder, which the next holder removes.
Status MakeData(CliEnv& env, const std::string& dir) {
  const fs::path data = fs::path(dir) / "data";
  const std::string lock_path = dir + "/.data.lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError("opening " + lock_path + ": " + std::strerror(errno));
  const auto give_up = std::chrono::steady_clock::now() + kDataWait;
  bool said = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int e = errno;
      ::close(fd);
      return UnavailableError("locking " + lock_path + ": " + std::strerror(e));
    }
    if (std::chrono::steady_clock::now() > give_up) {
      ::close(fd);
      return DeadlineExceededError("another process has been preparing the demo data in " + dir +
                                   " for over " + std::to_string(kDataWait.count()) +
                                   " s (it holds " + lock_path + ")");
    }
    if (!said) env.err << "demo: waiting for another rank to prepare " << data.string() << "\n";
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Status s = Status::Ok();
  if (!fs::is_directory(data / "train") || !fs::is_directory(data / "test")) {
    const fs::path partial = fs::path(dir) / "data.partial";
    std::error_code ec;
    fs::remove_all(partial, ec);
    fs::remove_all(data, ec);
    s = Synthesize(env, partial);
    if (s.ok()) {
      fs::rename(partial, data, ec);
      if (ec)
        s = InternalError("moving " + partial.string() + " to " + data.string() + ": " +
                          ec.message());
    }
  }
  ::close(fd);  // releases the lock
  return s;
}

// The demo's run configuration. The paths under `dir` are set on the parsed message, never
// pasted into the text, so any directory name (quotes, backslashes, newlines) stays what it is.
Result<core::ConfigFile> DemoConfig(const std::string& dir) {
  constexpr char kText[] = R"(
data {
  name: "tfrecord"
  options { key: "level" value: "frame" }
  options { key: "max_frames" value: "24" }
  options { key: "shuffle_buffer" value: "256" }
}
eval_data {
  name: "tfrecord"
  options { key: "level" value: "frame" }
  options { key: "max_frames" value: "24" }
  options { key: "shuffle_buffer" value: "0" }
}
model {
  name: "two_stream"
  options { key: "video_hidden" value: "32" }
  options { key: "audio_hidden" value: "16" }
}
optimizer { name: "sync" options { key: "rule" value: "adam" } }
trainer {
  steps: 300
  batch_size: 32
  seed: 1
  learning_rate { base: 0.005 schedule: "cosine" warmup_steps: 20 }
  log_every_steps: 25
  eval_every_steps: 100
  checkpoint_every_steps: 100
  keep_checkpoints: 2
}
)";
  REEL_ASSIGN_OR_RETURN(core::ConfigFile cfg, core::ParseConfig(kText, "demo config"));
  config::RunConfig& c = cfg.config;
  (*c.mutable_data()->mutable_options())["files"] = dir + "/data/train/*.tfrecord";
  (*c.mutable_eval_data()->mutable_options())["files"] = dir + "/data/test/*.tfrecord";
  config::Trainer& t = *c.mutable_trainer();
  t.set_num_classes(kClasses);
  t.set_checkpoint_dir(dir + "/checkpoints");
  t.set_metrics_log(dir + "/metrics.jsonl");
  t.set_tensorboard_dir(dir + "/tensorboard");
  return cfg;
}

Status RunDemo(CliEnv& env, const std::vector<std::string>& words) {
  Args args;
  args.Value("workdir")
      .Value("set", true)
      .Switch("quiet")
      .Switch("verbose")
      .Switch("resume")
      .Switch("print-config");
  REEL_RETURN_IF_ERROR(args.Parse(words));
  if (!args.positional().empty())
    return InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'");
  const std::string dir = args.Get("workdir", "reel-demo");
  const int verbosity = args.Has("quiet") ? 0 : args.Has("verbose") ? 2 : 1;
  REEL_ASSIGN_OR_RETURN(core::ConfigFile cfg, DemoConfig(dir));
  REEL_RETURN_IF_ERROR(ApplyOverrides(env, cfg, args.GetAll("set")));
  if (args.Has("print-config")) {
    env.out << core::ConfigToText(cfg.config);
    return Status::Ok();
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("--workdir " + dir + ": " + ec.message());
  REEL_RETURN_IF_ERROR(MakeData(env, dir));
  if (verbosity >= 1)
    env.err << "demo: training two_stream on " << dir << "/data/train, evaluating on " << dir
            << "/data/test (metrics: " << dir << "/metrics.jsonl)\n";
  core::TrainResult result;
  REEL_RETURN_IF_ERROR(TrainAndReport(env, cfg, args.Has("resume"), verbosity, &result));
  if (result.final_eval) {
    env.out << "\nheld-out metrics (" << dir << "/data/test):\n";
    PrintMetrics(env.out, *result.final_eval, false);
  }
  return Status::Ok();
}

}  // namespace

CliCommand DemoCliCommand() {
  return {
      "demo", "synthesize data, train two_stream briefly, evaluate and print the metrics",
      "reel demo [--workdir DIR] [--set section.field=value ...] [--quiet|--verbose] [--resume] "
      "[--print-config]",
      RunDemo};
}

}  // namespace reel::cli
