// The run configuration's trainer section as TrainerOptions (see reel/core/trainer_options.h).
#include "reel/core/trainer_options.h"

#include <fmt/format.h>

#include <cstdlib>

#include "reel/core/rank_plan.h"
#include "reel/core/train_job.h"

namespace reel::core {
namespace {

bool SchemaHas(const Registry& registry, ComponentKind kind, const std::string& name,
               const std::string& option) {
  const ComponentEntry* e = registry.Find(kind, name);
  if (e == nullptr) return false;
  for (const auto& spec : e->info.options)
    if (spec.name == option) return true;
  return false;
}

}  // namespace

TrainerOptions TrainerOptionsFrom(const ConfigFile& cfg, const TrainJobOptions& job) {
  const config::Trainer& t = cfg.config.trainer();
  TrainerOptions o;  // the defaults: every field below is overwritten only when the config has it
  o.steps = t.steps();
  if (t.has_epochs()) o.epochs = t.epochs();
  o.seed = t.seed();
  const config::LearningRate& lr = t.learning_rate();
  if (lr.has_base()) o.learning_rate.base = lr.base();
  if (lr.has_schedule()) o.learning_rate.schedule = lr.schedule();
  o.learning_rate.decay_steps = lr.decay_steps();
  if (lr.has_decay_rate()) o.learning_rate.decay_rate = lr.decay_rate();
  o.learning_rate.min_lr = lr.min_lr();
  o.learning_rate.warmup_steps = lr.warmup_steps();
  o.learning_rate.total_steps = lr.total_steps();
  o.learning_rate.total_epochs = lr.total_epochs();
  if (lr.has_scaling()) o.lr_scaling = lr.scaling();
  o.lr_reference_ranks = lr.reference_ranks();
  if (t.has_clip_norm()) o.clip_norm = t.clip_norm();
  o.eval_every_steps = t.eval_every_steps();
  if (t.has_log_every_steps()) o.log_every_steps = t.log_every_steps();
  o.checkpoint_every_steps = t.checkpoint_every_steps();
  if (t.has_keep_checkpoints()) o.keep_checkpoints = static_cast<int>(t.keep_checkpoints());
  o.checkpoint_dir = t.checkpoint_dir();
  o.commit_every_steps = t.commit_every_steps();
  if (!t.commit_dir().empty()) o.commit_dir = t.commit_dir();
  if (t.has_on_checkpoint_failure()) o.on_checkpoint_failure = t.on_checkpoint_failure();
  if (t.has_stop_on_nonfinite()) o.stop_on_nonfinite = t.stop_on_nonfinite();
  if (t.has_precision()) o.precision = t.precision();
  o.metrics_log = t.metrics_log();
  o.tensorboard_dir = t.tensorboard_dir();
  o.num_classes = NumClasses(cfg.config);
  if (t.has_eval_top_k()) o.eval_top_k = static_cast<int>(t.eval_top_k());
  o.model_name = cfg.config.model().name();
  o.config_text = ConfigToText(cfg.config);
  o.resume = job.resume;
  o.verbosity = job.verbosity;
  o.tty = job.tty;
  o.progress = job.progress;
  o.should_stop = job.should_stop;
  o.on_event = job.on_event;
  return o;
}

int64_t NumClasses(const config::RunConfig& config) {
  if (config.trainer().has_num_classes()) return config.trainer().num_classes();
  auto it = config.data().options().find("num_classes");
  // The data source checks its own option's value; the trainer rejects a count below 1.
  if (it != config.data().options().end()) return std::atoll(it->second.c_str());
  return TrainerOptions{}.num_classes;
}

std::map<std::string, std::string> ComponentOptions(const Registry& registry, ComponentKind kind,
                                                    const config::Component& component,
                                                    const config::RunConfig& config) {
  std::map<std::string, std::string> out = OptionMap(component);
  auto fill = [&](const std::string& key, const std::string& value) {
    if (!out.count(key) && SchemaHas(registry, kind, component.name(), key)) out[key] = value;
  };
  if (config.trainer().has_batch_size())
    fill("batch_size", std::to_string(config.trainer().batch_size()));
  fill("num_classes", std::to_string(NumClasses(config)));
  // Components that wait for other ranks (the sync optimizer's collectives) wait as long as the
  // transport section says.
  if (Result<Timeouts> t = TimeoutsFrom(config); t.ok())
    fill("timeout_ms", std::to_string(t->each.count()));
  return out;
}

RankSettings SettingsRanksShare(const Registry& registry, const config::RunConfig& config,
                                const TrainerOptions& options) {
  RankSettings out;
  auto section = [&](const std::string& prefix, ComponentKind kind, config::Component c) {
    if (c.name().empty()) c.set_name(registry.DefaultName(kind));
    out[prefix] = c.name();
    for (const auto& [key, value] : ComponentOptions(registry, kind, c, config))
      // How long to wait comes from the transport section, which may differ by host.
      if (key != "timeout_ms") out[prefix + ".options." + key] = value;
  };
  section("data", ComponentKind::kDataSource, config.data());
  if (config.has_eval_data()) section("eval_data", ComponentKind::kDataSource, config.eval_data());
  section("model", ComponentKind::kModel, config.model());
  section("optimizer", ComponentKind::kOptimizer, config.optimizer());
  auto exact = [](double v) { return fmt::format("{}", v); };  // shortest exact form
  const LrScheduleConfig& lr = options.learning_rate;
  out["trainer.seed"] = std::to_string(options.seed);
  out["trainer.learning_rate.base"] = exact(lr.base);
  out["trainer.learning_rate.schedule"] = lr.schedule;
  out["trainer.learning_rate.decay_steps"] = std::to_string(lr.decay_steps);
  out["trainer.learning_rate.decay_rate"] = exact(lr.decay_rate);
  out["trainer.learning_rate.min_lr"] = exact(lr.min_lr);
  out["trainer.learning_rate.warmup_steps"] = std::to_string(lr.warmup_steps);
  out["trainer.learning_rate.scaling"] = options.lr_scaling;
  out["trainer.learning_rate.reference_ranks"] = std::to_string(options.lr_reference_ranks);
  out["trainer.clip_norm"] = exact(options.clip_norm);
  out["trainer.num_classes"] = std::to_string(options.num_classes);
  out["trainer.eval_top_k"] = std::to_string(options.eval_top_k);
  return out;
}

}  // namespace reel::core
