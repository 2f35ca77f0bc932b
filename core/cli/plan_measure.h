// `reel plan --measure`: the rates of this machine that plans rest on (plan/machine_profile.h),
// measured with reel's own components as training uses them. docs/capacity.md lists each rate and
// how it is taken.
//
// Thread-safety: one call at a time (they use the machine's cores and a scratch folder).
#ifndef REEL_CORE_CLI_PLAN_MEASURE_H_
#define REEL_CORE_CLI_PLAN_MEASURE_H_

#include <map>
#include <string>

#include "cli.h"
#include "plan/machine_profile.h"

namespace reel::cli {

namespace plan = core::plan;

struct ModelSpec {
  std::string name;
  std::map<std::string, std::string> options;
  int64_t batch = 32;
  int64_t classes = 3862;
  int64_t frames = 300;  // for frame-level models
  std::string rule = "adam";
  double clip_norm = 1.0;                  // the trainer's (trainer.clip_norm; 0: none)
  bool stop_on_nonfinite = true;           // the trainer's (trainer.stop_on_nonfinite)
  Precision precision = Precision::kFp32;  // trainer.precision, resolved for this CPU
  // The config's training data (ComponentOptions, as the trainer gives them): the step is timed
  // on its batches when it yields any, else on synthetic ones of `frames` frames.
  std::string data;
  std::map<std::string, std::string> data_options;
  uint64_t seed = 0;
};

// The profile's key for a model's options: "k=v;k=v", sorted.
std::string OptionsKey(const std::map<std::string, std::string>& options);
// The key of a model measured as `spec` trains: its options, and "|precision=bf16" in bf16 (a
// rate measured in one precision does not answer for the other).
std::string ModelKey(const ModelSpec& spec);

// How much each node measurement moves: Full() for a profile to plan with, Quick() (1/16 of it,
// seconds instead of a minute) to try the command; smaller samples are noisier.
struct MeasureSizes {
  int64_t disk_bytes = int64_t{256} << 20;
  int64_t message_bytes = int64_t{16} << 20;
  int64_t s3_bytes = int64_t{64} << 20;
  int64_t rule_params = 10'000'000;
  int frame_videos = 192;  // of 300 frames
  int video_videos = 8192;
  int step_batches = 6;                    // of the config's data, stepped over in turn
  int64_t copy_bytes = int64_t{64} << 20;  // one thread's copy, beyond the caches
  static MeasureSizes Full() { return {}; }
  static MeasureSizes Quick() {
    return {int64_t{16} << 20, int64_t{1} << 20, int64_t{4} << 20, 625'000, 12, 512, 3,
            int64_t{16} << 20};
  }
};

// Node rates: decoding (frame and video level, one thread, on shards `synth` writes into
// `scratch`), local disk write and cold read in `scratch`, the tcp transport's allreduce,
// point-to-point rate and latency between two ranks on loopback, the update rule over 10M
// parameters, one thread's memory copy; S3 read rate of one connection when `s3_prefix`
// (s3://bucket/prefix) is given.
Result<plan::Rates> MeasureNode(CliEnv& env, const std::string& scratch,
                                const std::string& s3_prefix, const std::string& rule,
                                const MeasureSizes& sizes, int reps);

// One model's step and forward rate per core at its shape, and the step's split (backward, update).
Result<plan::ModelRates> MeasureModel(CliEnv& env, const ModelSpec& spec, int reps,
                                      int step_batches = 1);

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_PLAN_MEASURE_H_
