// From a run configuration (proto/config.proto) to what the trainer and the components are
// given. This is the one place that reads the config's trainer section: a field the config leaves
// out takes the default of TrainerOptions / LrScheduleConfig (reel/core/trainer.h, schedule.h),
// and a field it sets — 0 included — is passed on as written, so the trainer's own checks reject
// an explicit value that cannot work (e.g. `learning_rate { base: 0 }`) instead of replacing it.
//
// Thread-safety: pure functions of their arguments.
#ifndef REEL_CORE_TRAINER_OPTIONS_H_
#define REEL_CORE_TRAINER_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>

#include "reel/core/config.h"
#include "reel/core/rank_agreement.h"
#include "reel/core/registry.h"
#include "reel/core/trainer.h"

namespace reel::core {

struct TrainJobOptions;  // reel/core/train_job.h

// The trainer's options for a run: the config's trainer section over TrainerOptions' defaults,
// plus the job's interactive settings (resume, progress, stop flag).
TrainerOptions TrainerOptionsFrom(const ConfigFile& cfg, const TrainJobOptions& job);

// The number of classes of a run: trainer.num_classes when set, else the data section's
// num_classes option, else 3862 (YouTube-8M 2018).
int64_t NumClasses(const config::RunConfig& config);

// A component's options plus the trainer-level settings its schema accepts and the component
// section does not set itself: trainer.batch_size (when set) and num_classes.
std::map<std::string, std::string> ComponentOptions(const Registry& registry, ComponentKind kind,
                                                    const config::Component& component,
                                                    const config::RunConfig& config);

// What every rank of one training job must share (reel/core/rank_agreement.h): the data,
// eval_data, model and optimizer sections (name, as resolved, and options, as the components get
// them) and the trainer settings that decide what the ranks compute: seed (it partitions the data
// between the ranks), learning rate, clip norm, classes and GAP's k (the trainer compares the
// step budget and cadence itself). Not compared: how each host reaches things (transport,
// storage, plugin_dirs, and the timeouts components take from the transport section) and what
// only rank 0 writes (checkpoint_dir, metrics_log, tensorboard_dir, keep_checkpoints,
// on_checkpoint_failure).
RankSettings SettingsRanksShare(const Registry& registry, const config::RunConfig& config,
                                const TrainerOptions& options);

}  // namespace reel::core

#endif  // REEL_CORE_TRAINER_OPTIONS_H_
