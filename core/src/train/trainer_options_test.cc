#include "reel/core/trainer_options.h"

#include <gtest/gtest.h>

#include "reel/core/schedule.h"
#include "reel/core/train_job.h"
#include "reel/plugin.h"

namespace reel::core {
namespace {

TrainerOptions FromText(const std::string& text) {
  Result<ConfigFile> cfg = ParseConfig(text, "run.pbtxt");
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  return TrainerOptionsFrom(*cfg, TrainJobOptions{});
}

// A config without a trainer section gets TrainerOptions' own defaults, which are the documented
// ones (proto/config.proto's comments).
TEST(TrainerOptionsTest, AbsentFieldsTakeTheTrainersDefaults) {
  const TrainerOptions got = FromText("model { name: \"m\" }");
  const TrainerOptions def;
  EXPECT_EQ(got.epochs, def.epochs);
  EXPECT_EQ(got.epochs, 1);
  EXPECT_EQ(got.learning_rate.base, def.learning_rate.base);
  EXPECT_DOUBLE_EQ(got.learning_rate.base, 0.001);
  EXPECT_EQ(got.learning_rate.schedule, "constant");
  EXPECT_DOUBLE_EQ(got.learning_rate.decay_rate, 0.95);
  EXPECT_DOUBLE_EQ(got.clip_norm, 1.0);
  EXPECT_EQ(got.log_every_steps, 50);
  EXPECT_EQ(got.keep_checkpoints, 3);
  EXPECT_EQ(got.on_checkpoint_failure, "stop");
  EXPECT_TRUE(got.stop_on_nonfinite);
  EXPECT_EQ(got.precision, "fp32");
  EXPECT_EQ(got.eval_top_k, 20);
  EXPECT_EQ(got.num_classes, 3862);
  EXPECT_EQ(got.model_name, "m");
  EXPECT_TRUE(LrSchedule::Create(got.learning_rate).ok());
}

TEST(TrainerOptionsTest, SetFieldsArePassedOn) {
  const TrainerOptions got = FromText(R"(trainer {
    steps: 7 epochs: 4 seed: 9 clip_norm: 2.5 log_every_steps: 3 keep_checkpoints: 5
    eval_top_k: 7 num_classes: 12 eval_every_steps: 2 checkpoint_every_steps: 6
    on_checkpoint_failure: "continue" stop_on_nonfinite: false precision: "auto"
    learning_rate { base: 0.25 schedule: "exponential" decay_steps: 10 decay_rate: 0.5
                    min_lr: 0.125 warmup_steps: 2 }
  })");
  EXPECT_EQ(got.steps, 7);
  EXPECT_EQ(got.epochs, 4);
  EXPECT_EQ(got.seed, 9u);
  EXPECT_DOUBLE_EQ(got.clip_norm, 2.5);
  EXPECT_EQ(got.log_every_steps, 3);
  EXPECT_EQ(got.keep_checkpoints, 5);
  EXPECT_EQ(got.eval_top_k, 7);
  EXPECT_EQ(got.num_classes, 12);
  EXPECT_EQ(got.eval_every_steps, 2);
  EXPECT_EQ(got.checkpoint_every_steps, 6);
  EXPECT_EQ(got.on_checkpoint_failure, "continue");
  EXPECT_FALSE(got.stop_on_nonfinite);
  EXPECT_EQ(got.precision, "auto");
  EXPECT_DOUBLE_EQ(got.learning_rate.base, 0.25);
  EXPECT_EQ(got.learning_rate.schedule, "exponential");
  EXPECT_EQ(got.learning_rate.decay_steps, 10);
  EXPECT_DOUBLE_EQ(got.learning_rate.decay_rate, 0.5);
  EXPECT_DOUBLE_EQ(got.learning_rate.min_lr, 0.125);
  EXPECT_EQ(got.learning_rate.warmup_steps, 2);
}

// An explicit 0 is what the user wrote, never "use the default": keep_checkpoints: 0 keeps all
// (reel/core/checkpoint.h), log_every_steps: 0 logs nothing, clip_norm: 0 disables clipping, and
// the values that cannot work reach the checks that reject them with the field's name.
TEST(TrainerOptionsTest, ExplicitZerosAreKept) {
  const TrainerOptions got = FromText(R"(trainer {
    epochs: 0 clip_norm: 0 log_every_steps: 0 keep_checkpoints: 0 eval_top_k: 0 num_classes: 0
    learning_rate { base: 0 decay_rate: 0 }
  })");
  EXPECT_EQ(got.epochs, 0);
  EXPECT_EQ(got.clip_norm, 0.0);
  EXPECT_EQ(got.log_every_steps, 0);
  EXPECT_EQ(got.keep_checkpoints, 0);
  EXPECT_EQ(got.eval_top_k, 0);
  EXPECT_EQ(got.num_classes, 0);
  EXPECT_EQ(got.learning_rate.base, 0.0);
  EXPECT_EQ(got.learning_rate.decay_rate, 0.0);
  Result<LrSchedule> lr = LrSchedule::Create(got.learning_rate);
  EXPECT_EQ(lr.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(lr.status().message().find("learning_rate.base"), std::string::npos) << lr.status();
}

TEST(TrainerOptionsTest, OverridesToZeroAreKept) {
  Result<ConfigFile> cfg = ParseConfig("trainer { keep_checkpoints: 4 }", "run.pbtxt");
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(ApplyOverride(*cfg, "trainer.keep_checkpoints=0").ok());
  ASSERT_TRUE(ApplyOverride(*cfg, "trainer.log_every_steps=0").ok());
  const TrainerOptions got = TrainerOptionsFrom(*cfg, TrainJobOptions{});
  EXPECT_EQ(got.keep_checkpoints, 0);
  EXPECT_EQ(got.log_every_steps, 0);
  // The recorded config (what a checkpoint keeps) still says so.
  EXPECT_NE(got.config_text.find("keep_checkpoints: 0"), std::string::npos) << got.config_text;
}

TEST(TrainerOptionsTest, NumClassesFromTrainerThenDataThenDefault) {
  auto num = [](const std::string& text) {
    Result<ConfigFile> cfg = ParseConfig(text, "run.pbtxt");
    EXPECT_TRUE(cfg.ok()) << cfg.status();
    return NumClasses(cfg->config);
  };
  EXPECT_EQ(num(""), TrainerOptions{}.num_classes);
  EXPECT_EQ(num(R"(data { name: "d" options { key: "num_classes" value: "16" } })"), 16);
  EXPECT_EQ(num(R"(data { name: "d" options { key: "num_classes" value: "16" } }
                   trainer { num_classes: 5 })"),
            5);
}

// A data source named "probe" whose schema has batch_size, num_classes and other.
Status RegisterProbeDataSource(Registrar& r) noexcept {
  return r.Add<DataSource>(
      {"probe",
       "a schema to fill",
       {IntOption("batch_size", 8, ""), IntOption("num_classes", 1, ""),
        IntOption("other", 0, "")}},
      [](const Options&, const DataSourceContext&) -> Result<std::unique_ptr<DataSource>> {
        return UnimplementedError("not built in this test");
      });
}

// batch_size and num_classes reach a component whose schema has them, unless its own section
// sets them; an unset trainer.batch_size leaves the component's default alone.
TEST(TrainerOptionsTest, ComponentOptionsFillTrainerLevelSettings) {
  Registry registry;
  ASSERT_TRUE(registry.RegisterFrom("test", "", nullptr, RegisterProbeDataSource).ok());
  auto options = [&](const std::string& text) {
    Result<ConfigFile> cfg = ParseConfig(text, "run.pbtxt");
    EXPECT_TRUE(cfg.ok()) << cfg.status();
    return ComponentOptions(registry, ComponentKind::kDataSource, cfg->config.data(), cfg->config);
  };
  using Map = std::map<std::string, std::string>;
  EXPECT_EQ(options(R"(data { name: "probe" })"), (Map{{"num_classes", "3862"}}));
  EXPECT_EQ(options(R"(data { name: "probe" } trainer { batch_size: 32 num_classes: 4 })"),
            (Map{{"batch_size", "32"}, {"num_classes", "4"}}));
  // An explicit 0 is passed on for the component's own check to reject by name.
  EXPECT_EQ(options(R"(data { name: "probe" } trainer { batch_size: 0 })"),
            (Map{{"batch_size", "0"}, {"num_classes", "3862"}}));
  EXPECT_EQ(options(R"(data { name: "probe" options { key: "batch_size" value: "2" } }
                       trainer { batch_size: 32 })"),
            (Map{{"batch_size", "2"}, {"num_classes", "3862"}}));
}

// A component that waits for other ranks (its schema has timeout_ms) waits as long as the
// transport section says, 300 s by default, unless its own section sets it
// (docs/distributed.md); one without timeout_ms in its schema gets none.
Status RegisterWaitingDataSource(Registrar& r) noexcept {
  return r.Add<DataSource>(
      {"waiter", "a schema with a deadline", {IntOption("timeout_ms", 600000, "")}},
      [](const Options&, const DataSourceContext&) -> Result<std::unique_ptr<DataSource>> {
        return UnimplementedError("not built in this test");
      });
}

TEST(TrainerOptionsTest, AComponentsTimeoutIsTheTransportsUnlessItSetsItsOwn) {
  Registry registry;
  ASSERT_TRUE(registry.RegisterFrom("test", "", nullptr, RegisterProbeDataSource).ok());
  ASSERT_TRUE(registry.RegisterFrom("test2", "", nullptr, RegisterWaitingDataSource).ok());
  auto timeout = [&](const std::string& text) -> std::string {
    Result<ConfigFile> cfg = ParseConfig(text, "run.pbtxt");
    EXPECT_TRUE(cfg.ok()) << cfg.status();
    const std::map<std::string, std::string> got =
        ComponentOptions(registry, ComponentKind::kDataSource, cfg->config.data(), cfg->config);
    return got.count("timeout_ms") ? got.at("timeout_ms") : "(none)";
  };
  EXPECT_EQ(timeout(R"(data { name: "waiter" })"), "300000");
  EXPECT_EQ(timeout(R"(data { name: "waiter" } transport { timeout_seconds: 7 })"), "7000");
  EXPECT_EQ(timeout(R"(data { name: "waiter" options { key: "timeout_ms" value: "5" } }
                       transport { timeout_seconds: 7 })"),
            "5");
  EXPECT_EQ(timeout(R"(data { name: "probe" } transport { timeout_seconds: 7 })"), "(none)");
}

// What ranks compute together is compared; how each host reaches things and what rank 0 alone
// writes are not.
TEST(TrainerOptionsTest, SettingsRanksShareAreWhatTheRanksComputeNotWhereTheyWrite) {
  Registry registry;
  ASSERT_TRUE(registry.RegisterFrom("test", "", nullptr, RegisterProbeDataSource).ok());
  const std::string base = R"(data { name: "probe" options { key: "files" value: "d/*" } }
      model { name: "m" options { key: "hidden" value: "8" } } optimizer { name: "o" } )";
  auto settings = [&](const std::string& more) {
    Result<ConfigFile> cfg = ParseConfig(base + more, "run.pbtxt");
    EXPECT_TRUE(cfg.ok()) << cfg.status();
    return SettingsRanksShare(registry, cfg->config, TrainerOptionsFrom(*cfg, TrainJobOptions{}));
  };
  const RankSettings plain = settings("");
  EXPECT_EQ(plain.at("data"), "probe");
  EXPECT_EQ(plain.at("data.options.files"), "d/*");
  EXPECT_EQ(plain.at("model.options.hidden"), "8");
  EXPECT_EQ(plain.at("optimizer"), "o");
  EXPECT_EQ(plain.at("trainer.learning_rate.base"), "0.001");
  EXPECT_EQ(plain.count("eval_data"), 0u);
  // Per host, or written by rank 0 alone: the same settings.
  EXPECT_EQ(settings(R"(trainer { checkpoint_dir: "/a" metrics_log: "/b" tensorboard_dir: "/c"
                                  keep_checkpoints: 9 on_checkpoint_failure: "continue" }
                        transport { name: "tcp" options { key: "interface" value: "eth1" }
                                    timeout_seconds: 7 }
                        storage { name: "s3" options { key: "endpoint" value: "http://h:1" } })"),
            plain);
  // What the ranks compute: each difference shows under its name.
  auto differs = [&](const std::string& more, const std::string& name, const std::string& value) {
    const RankSettings got = settings(more);
    EXPECT_EQ(got.count(name) ? got.at(name) : "(none)", value) << more;
    EXPECT_NE(got, plain) << more;
  };
  differs("trainer { seed: 3 }", "trainer.seed", "3");
  differs("trainer { batch_size: 16 }", "data.options.batch_size", "16");
  differs("trainer { learning_rate { base: 0.1 } }", "trainer.learning_rate.base", "0.1");
  differs("trainer { clip_norm: 0 }", "trainer.clip_norm", "0");
  differs("trainer { eval_top_k: 3 }", "trainer.eval_top_k", "3");
  differs(R"(eval_data { name: "probe" options { key: "files" value: "e/*" } })",
          "eval_data.options.files", "e/*");
}

}  // namespace
}  // namespace reel::core
