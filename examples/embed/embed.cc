// A host application embedding reel, through the installed headers and libreel only:
//   1. a Host with the plugins of a directory (the tfrecord data source and the moe models);
//   2. synthetic video-level data written by the tfrecord plugin's `synth` command, run from
//      here as a component (no reel executable involved), three shards to train, one held out;
//   3. a training run from a run configuration built in code (RunTrainJob);
//   4. the trained model read back from its checkpoint and evaluated on held-out videos
//      (Evaluate), beside the same model untrained, so the output shows what training bought.
// Exit status 0 when the trained model beats the untrained one on GAP.
//
// usage: reel_embed WORKDIR PLUGIN_DIR
#include <cstdio>
#include <iostream>

#include "reel/core/config.h"
#include "reel/core/evaluator.h"
#include "reel/core/host.h"
#include "reel/core/train_job.h"

namespace {

constexpr int64_t kClasses = 8;

// A plugin command as a component: here `synth`, writing YouTube-8M-format shards.
reel::Status RunCommand(reel::core::Host& host, const std::string& name,
                        const std::vector<std::string>& args) {
  REEL_ASSIGN_OR_RETURN(auto command, host.registry().CreateCommand(name));
  reel::CommandContext ctx{&host.storage(), &std::cout, &std::cerr};
  return command->Run(args, ctx).WithContext("reel " + name);
}

reel::Result<reel::core::ConfigFile> TrainingConfig(const std::string& dir) {
  REEL_ASSIGN_OR_RETURN(reel::core::ConfigFile cfg, reel::core::ParseConfig(R"(
data { name: "tfrecord" options { key: "level" value: "video" } }
model { name: "logistic" }
optimizer { name: "sync" options { key: "rule" value: "adam" } }
trainer { steps: 150 batch_size: 16 seed: 1 learning_rate { base: 0.05 } log_every_steps: 50 }
)",
                                                                            "embedded config"));
  // Paths are set on the message, not pasted into the text, so any directory name works.
  (*cfg.config.mutable_data()->mutable_options())["files"] = dir + "/data/*000[012].tfrecord";
  cfg.config.mutable_trainer()->set_num_classes(kClasses);
  cfg.config.mutable_trainer()->set_checkpoint_dir(dir + "/checkpoints");
  return cfg;
}

reel::Result<reel::core::EvalMetrics> EvaluateOn(reel::core::Host& host, reel::Model& model,
                                                 const std::string& files) {
  reel::DataSourceContext ctx{.shard = {}, .seed = 0, .storage = &host.storage()};
  REEL_ASSIGN_OR_RETURN(auto source,
                        host.registry().CreateDataSource("tfrecord",
                                                         {{"files", files},
                                                          {"level", "video"},
                                                          {"num_classes", std::to_string(kClasses)},
                                                          {"batch_size", "64"}},
                                                         ctx));
  reel::Model* models[] = {&model};
  return reel::core::Evaluate(models, *source, kClasses, 5, /*comm=*/nullptr);
}

reel::Status Run(const std::string& dir, const std::string& plugin_dir) {
  REEL_ASSIGN_OR_RETURN(auto host, reel::core::Host::Create({.plugin_dirs = {plugin_dir}}));
  // One synthetic set (its planted signal depends on the seed), split by shard: three to train
  // on, the fourth held out.
  REEL_RETURN_IF_ERROR(
      RunCommand(*host, "synth",
                 {"--out", dir + "/data", "--videos", "1200", "--classes", std::to_string(kClasses),
                  "--level", "video", "--shards", "4", "--seed", "1"}));

  REEL_ASSIGN_OR_RETURN(reel::core::ConfigFile cfg, TrainingConfig(dir));
  reel::core::TrainJobOptions options;
  options.verbosity = 0;
  options.single_process = true;
  REEL_ASSIGN_OR_RETURN(reel::core::TrainResult trained,
                        reel::core::RunTrainJob(*host, cfg, options));
  std::printf("trained %lld steps\n", static_cast<long long>(trained.steps));

  REEL_ASSIGN_OR_RETURN(reel::core::CheckpointModel checkpoint,
                        reel::core::LoadModelFromCheckpoint(*host, dir + "/checkpoints"));
  REEL_ASSIGN_OR_RETURN(reel::core::EvalMetrics after,
                        EvaluateOn(*host, *checkpoint.model, dir + "/data/*0003.tfrecord"));

  // The same model, initialised and never trained.
  reel::ParamArena arena;
  REEL_ASSIGN_OR_RETURN(auto untrained,
                        host->registry().CreateModel("logistic", {}, {.num_classes = kClasses}));
  REEL_RETURN_IF_ERROR(untrained->DeclareParams(arena));
  arena.Finalize();
  REEL_RETURN_IF_ERROR(untrained->Initialize(1));
  REEL_ASSIGN_OR_RETURN(reel::core::EvalMetrics before,
                        EvaluateOn(*host, *untrained, dir + "/data/*0003.tfrecord"));

  std::printf("held-out videos %lld: GAP@%d untrained %.3f, trained %.3f; Hit@1 %.3f -> %.3f\n",
              static_cast<long long>(after.videos), after.top_k, before.gap, after.gap,
              before.hit_at_1, after.hit_at_1);
  if (!(after.gap > before.gap))
    return reel::InternalError("training did not improve GAP on the held-out videos");
  return reel::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s WORKDIR PLUGIN_DIR\n", argv[0]);
    return 2;
  }
  reel::Status s = Run(argv[1], argv[2]);
  if (!s.ok()) std::fprintf(stderr, "reel_embed: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
