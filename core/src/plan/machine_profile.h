// A machine profile: the rates `reel plan --measure` measured on one node, kept as a small text
// file that later plans read (docs/capacity.md), so a user profiles one node of a cluster and
// plans for N. One `KEY VALUE` line per node rate, one `model NAME KEY=VALUE...` line per model
// shape measured; `#` starts a comment. A file of another format version is refused.
//
// Thread-safety: values and pure functions.
#ifndef REEL_CORE_SRC_PLAN_MACHINE_PROFILE_H_
#define REEL_CORE_SRC_PLAN_MACHINE_PROFILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/capacity_model.h"
#include "reel/status.h"

namespace reel::core::plan {

inline constexpr int kProfileVersion = 1;

// One model at one shape: what its step and evaluation cost on this machine.
struct ModelRates {
  std::string name;     // the registered model, e.g. "bilstm_video"
  std::string options;  // its options as "k=v;k=v", sorted ("" for none)
  int64_t batch = 0;
  int64_t classes = 0;
  double frames = 0;  // frames per video measured at (1 for video-level models)
  double params = 0;
  double step_examples_per_core = 0;
  double forward_examples_per_core = 0;
  double startup_s = 0;  // model setup, optimizer setup and cold first step over a warm step
  // The config's data source's wait for its first batch, per record it had read by then (the
  // shuffle buffer's fill, read and parsed on one thread); 0: not measured (no data, or an older
  // reel's line).
  double fill_s_per_record = 0;
  // The step's split, as shares of its time (Rates::backward_fraction); -1: a line written by an
  // older reel, which did not measure it.
  double backward_fraction = -1;
  double update_fraction = -1;
};

struct MachineProfile {
  std::string host;      // where it was measured
  std::string measured;  // when (UTC, ISO 8601)
  std::string reel_version;
  Rates node;  // the node's rates; the model fields (step, forward, frames) stay 0 here
  std::vector<ModelRates> models;

  // The model measured with these options, batch and classes; null when none was.
  const ModelRates* Find(const std::string& name, const std::string& options, int64_t batch,
                         int64_t classes) const;
  // Adds `m`, replacing a measurement of the same model, options, batch and classes.
  void Put(ModelRates m);
};

// The node's rates with the model's filled in; a video-level model (frames 1) decodes at the
// video-level rate.
Rates RatesFor(const MachineProfile& profile, const ModelRates& model);

std::string FormatProfile(const MachineProfile& profile);

// Errors: InvalidArgument naming `name` and the line for a malformed line, an unknown key, or a
// profile of another format version (with what to do about it).
Result<MachineProfile> ParseProfile(std::string_view text, const std::string& name);

}  // namespace reel::core::plan

#endif  // REEL_CORE_SRC_PLAN_MACHINE_PROFILE_H_
