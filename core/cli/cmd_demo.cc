// `reel demo [--workdir DIR] [--set ...]`: synthetic frame-level data → two_stream → metrics.
// The README's main command: everything it needs is generated, so it runs on a fresh checkout.
#include <filesystem>

#include "args.h"
#include "cli.h"
#include "train_cli.h"

namespace reel::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kClasses = 16;

// Train and test come from one `reel synth` run (one planted pattern per class), split by shard:
// the last of five shards becomes the held-out test set.
Status MakeData(CliEnv& env, const std::string& dir) {
  const std::string train = dir + "/data/train", test = dir + "/data/test";
  if (!fs::is_directory(train) || fs::is_empty(train)) {
    if (env.host.registry().Find(ComponentKind::kCommand, "synth") == nullptr)
      return NotFoundError(
          "the demo needs the `synth` command of the tfrecord plugin, which was "
          "not found (see `reel plugins`)");
    REEL_ASSIGN_OR_RETURN(auto synth, env.host.registry().CreateCommand("synth"));
    std::error_code ec;
    fs::remove_all(test, ec);
    CommandContext ctx{&env.host.storage(), &env.err, &env.err};
    REEL_RETURN_IF_ERROR(synth->Run(
        {"--out",        train,   "--videos",     "1000", "--classes",    std::to_string(kClasses),
         "--level",      "frame", "--shards",     "5",    "--seed",       "7",
         "--min-frames", "8",     "--max-frames", "24",   "--max-labels", "3",
         "--amplitude",  "0.1",   "--noise",      "1.0"},
        ctx));
    std::vector<fs::path> shards;
    for (const auto& e : fs::directory_iterator(train)) shards.push_back(e.path());
    std::sort(shards.begin(), shards.end());
    if (shards.size() < 2)
      return InternalError("synth wrote " + std::to_string(shards.size()) + " shard(s) to " +
                           train);
    fs::create_directories(test);
    fs::rename(shards.back(), fs::path(test) / shards.back().filename(), ec);
    if (ec)
      return InternalError("moving " + shards.back().string() + " to " + test + ": " +
                           ec.message());
  }
  return Status::Ok();
}

std::string DemoConfig(const std::string& dir) {
  auto source = [&](const std::string& files, int shuffle) {
    return "{ name: \"tfrecord\" options { key: \"files\" value: \"" + files +
           "\" } options { key: \"level\" value: \"frame\" } options { key: \"max_frames\" value: "
           "\"24\" } options { key: \"shuffle_buffer\" value: \"" +
           std::to_string(shuffle) + "\" } }\n";
  };
  return "data " + source(dir + "/data/train/*.tfrecord", 256) + "eval_data " +
         source(dir + "/data/test/*.tfrecord", 0) +
         "model { name: \"two_stream\" options { key: \"video_hidden\" value: \"32\" } "
         "options { key: \"audio_hidden\" value: \"16\" } }\n"
         "optimizer { name: \"sync\" options { key: \"rule\" value: \"adam\" } }\n"
         "trainer {\n  steps: 300\n  batch_size: 32\n  seed: 1\n  num_classes: " +
         std::to_string(kClasses) +
         "\n  learning_rate { base: 0.005 schedule: \"cosine\" warmup_steps: 20 }\n"
         "  log_every_steps: 25\n  eval_every_steps: 100\n  checkpoint_every_steps: 100\n"
         "  keep_checkpoints: 2\n  checkpoint_dir: \"" +
         dir +
         "/checkpoints\"\n"
         "  metrics_log: \"" +
         dir + "/metrics.jsonl\"\n  tensorboard_dir: \"" + dir + "/tensorboard\"\n}\n";
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
  REEL_ASSIGN_OR_RETURN(core::ConfigFile cfg, core::ParseConfig(DemoConfig(dir), "demo config"));
  for (const std::string& o : args.GetAll("set")) REEL_RETURN_IF_ERROR(core::ApplyOverride(cfg, o));
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
      "reel demo [--workdir DIR] [--set section.field=value ...] [--quiet|--verbose] [--resume]",
      RunDemo};
}

}  // namespace reel::cli
