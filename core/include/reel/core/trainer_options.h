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

}  // namespace reel::core

#endif  // REEL_CORE_TRAINER_OPTIONS_H_
