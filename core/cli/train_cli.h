// Helpers shared by `reel train`, `eval`, `predict` and `demo`: interrupting training cleanly,
// config loading with --set overrides, and building an evaluation data source for a pattern.
#ifndef REEL_CORE_CLI_TRAIN_CLI_H_
#define REEL_CORE_CLI_TRAIN_CLI_H_

#include <string>
#include <vector>

#include "cli.h"
#include "reel/core/config.h"
#include "reel/core/train_job.h"

namespace reel::cli {

// Reads `path` through the host's storage (a local file or any URI, e.g. s3://), then
// ApplyOverrides.
Result<core::ConfigFile> LoadConfigWithOverrides(CliEnv& env, const std::string& path,
                                                 const std::vector<std::string>& overrides);
// Applies every "section.field=value" override in order, then what the config asks of the host:
// its plugin_dirs and storage sections (core::Host::ApplyRunConfig).
Status ApplyOverrides(CliEnv& env, core::ConfigFile& cfg,
                      const std::vector<std::string>& overrides);

// Runs a training job with progress on env.err; the first SIGINT or SIGTERM finishes the step,
// writes a checkpoint and returns Cancelled (a second one kills the process). Prints a summary to
// env.out.
Status TrainAndReport(CliEnv& env, const core::ConfigFile& cfg, bool resume, int verbosity,
                      core::TrainResult* result = nullptr);

// NotFound naming the pattern when a comma-separated list of patterns matches no object.
Status CheckPatternsMatch(CliEnv& env, const std::string& patterns);

// Metrics as the `reel eval` table or as one JSON object.
void PrintMetrics(std::ostream& out, const core::EvalMetrics& m, bool json);

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_TRAIN_CLI_H_
