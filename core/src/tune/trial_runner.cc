// TrainingTrialRunner (reel/core/tune.h): a trial is an ordinary training run, kept to its folder.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "reel/core/schedule.h"
#include "reel/core/train_job.h"
#include "reel/core/trainer_options.h"
#include "reel/core/tune.h"

namespace reel::core {

TrialRunner TrainingTrialRunner(Host& host) {
  return [&host](const TrialRequest& req) -> Result<TrialRun> {
    REEL_ASSIGN_OR_RETURN(ConfigFile cfg, ParseConfig(req.config_text, req.dir + "/config.pbtxt"));
    config::Trainer& t = *cfg.config.mutable_trainer();
    const std::filesystem::path dir(req.dir);
    t.set_checkpoint_dir((dir / "checkpoints").string());
    t.set_metrics_log((dir / "metrics.jsonl").string());
    if (!t.tensorboard_dir().empty()) t.set_tensorboard_dir((dir / "tensorboard").string());
    {  // the trial's exact config beside its results, for reading and rerunning by hand
      std::ofstream out(dir / "config.pbtxt", std::ios::trunc);
      out << ConfigToText(cfg.config);
    }
    TrainJobOptions job;
    job.resume = req.resume;
    job.verbosity = 0;
    job.single_process = true;
    job.threads = req.threads;
    job.should_stop = [stop = req.should_stop](int64_t) { return stop && stop(); };
    REEL_ASSIGN_OR_RETURN(TrainResult r, RunTrainJob(host, cfg, job));
    TrialRun run;
    run.steps = r.steps;
    run.last_loss = r.last_loss;
    run.interrupted = r.interrupted;
    if (r.interrupted) return run;
    if (!std::isfinite(r.last_loss))
      return FailedPreconditionError("diverged: the training loss is " +
                                     std::to_string(r.last_loss) + " at step " +
                                     std::to_string(r.steps));
    if (!r.final_eval) return FailedPreconditionError("the trial ended without a final evaluation");
    run.eval = *r.final_eval;
    return run;
  };
}

ConfigCheck TrainingConfigCheck(Host& host) {
  return [&host](const ConfigFile& cfg) -> Status {
    const Registry& reg = host.registry();
    REEL_RETURN_IF_ERROR(ValidateComponents(cfg, reg, {"data", "eval_data", "model"}));
    const config::RunConfig& c = cfg.config;
    const TrainerOptions o = TrainerOptionsFrom(cfg, TrainJobOptions{});
    LrScheduleConfig lr = o.learning_rate;
    if (lr.total_steps == 0 && lr.total_epochs == 0) {  // as the trainer fills them
      lr.total_steps = o.steps;
      if (lr.total_steps == 0) lr.total_epochs = o.epochs;
    }
    REEL_RETURN_IF_ERROR(LrSchedule::Create(lr).status().WithContext("trainer"));
    // The sources open their inputs when built: missing files are found here. The registry's
    // errors name the section and component.
    const DataSourceContext ctx{{0, 1}, c.trainer().seed(), &host};
    for (const config::Component* section : {&c.data(), &c.eval_data()})
      REEL_RETURN_IF_ERROR(
          reg.CreateDataSource(section->name(),
                               ComponentOptions(reg, ComponentKind::kDataSource, *section, c), ctx)
              .status());
    REEL_RETURN_IF_ERROR(reg.CreateModel(c.model().name(),
                                         ComponentOptions(reg, ComponentKind::kModel, c.model(), c),
                                         ModelContext{o.num_classes, 1})
                             .status());
    return Status::Ok();
  };
}

}  // namespace reel::core
