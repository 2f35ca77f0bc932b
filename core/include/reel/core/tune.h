// Hyperparameter search as task parallelism: `reel tune`.
//
// A search (config::TuneConfig, proto/tune.proto) is a base training config, dimensions (field
// paths into it with values or ranges) and an algorithm (grid, random, ASHA). Every trial is an
// ordinary training run of the base config with one assignment of the dimensions, in its own
// folder under the workdir (`trials/c<config>/r<rung>/`: checkpoints and metrics log), scored by a
// held-out metric of its final evaluation. Trials run in parallel:
//   - in one process, `parallel` at a time, each on its own thread with its own model, data source
//     and cores / parallel compute threads;
//   - across ranks (`reel launch -n N` or mpirun): rank 0 schedules, every other rank asks for the
//     next trial whenever it is free (dynamic scheduling: a slow trial stalls nobody), over the
//     same Communicator contract as training (tcp, mpi, inproc).
// Every start and end is appended to `journal.jsonl` in the workdir as it happens; a resumed
// search skips finished trials and reruns interrupted ones. A failed trial (an error, a loss that
// diverged to NaN, a worker rank that died) is recorded with its error, retried if configured, and
// the search goes on. At the end: `results.csv` (one row per trial, ranked within its rung) and
// `best.pbtxt` (the best trial of the highest rung reached: its training config, learning-rate
// schedule included, so `reel train` on it reproduces the trial).
//
// Thread-safety: RunTune blocks its caller; the trial runner is called from several threads at
// once and must be safe for that (TrainingTrialRunner is).
#ifndef REEL_CORE_TUNE_H_
#define REEL_CORE_TUNE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "reel/core/config.h"
#include "reel/core/host.h"
#include "reel/core/metrics.h"
#include "reel/status.h"
#include "reel/transport.h"
#include "tune.pb.h"

namespace reel::core {

// A search config read from a file: the TuneConfig and its base as a ConfigFile (for messages).
struct TuneConfigFile {
  config::TuneConfig tune;
  ConfigFile base;
};
// Parses a text-format TuneConfig; errors name file:line:column. Does not validate the search.
Result<TuneConfigFile> ParseTuneConfig(std::string_view text, std::string name);

// What one trial asks of a runner.
struct TrialRequest {
  std::string config_text;  // the trial's RunConfig (base + assignment + budget), text format
  std::string dir;          // the trial's folder; its checkpoints go to dir/checkpoints
  bool resume = false;      // continue from the newest checkpoint in dir/checkpoints
  int threads = 0;          // compute threads the trial may use; 0: all
  std::function<bool()> should_stop;  // polled between steps; true: stop (the trial is interrupted)
};
struct TrialRun {
  EvalMetrics eval;
  int64_t steps = 0;
  double last_loss = 0;
  bool interrupted = false;
};
using TrialRunner = std::function<Result<TrialRun>(const TrialRequest&)>;

// The runner `reel tune` uses: RunTrainJob in this process as a world of one rank (whatever the
// environment says about ranks), with the checkpoint folder and metrics log moved into the
// trial's folder. A loss that is not finite fails the trial ("diverged").
TrialRunner TrainingTrialRunner(Host& host);

// Checks a run config without training: its components are known and take their options, the
// learning-rate schedule is consistent, and its data sources (training and evaluation) and model
// can be built. The error names the section at fault.
using ConfigCheck = std::function<Status(const ConfigFile&)>;
ConfigCheck TrainingConfigCheck(Host& host);

// How `reel tune` runs a search (command-line choices; the search itself is in the config).
struct TuneOptions {
  std::string workdir = "reel-tune";  // a local folder
  bool resume = false;                // continue the search whose journal is in workdir
  int parallel = 0;                   // trials at once in this process; 0: the config's, else cores
  std::ostream* progress = nullptr;   // live progress (a redrawn line on a tty, else plain lines)
  bool tty = false;
  int verbosity = 1;
  std::function<bool()> should_stop;  // Ctrl-C: running trials stop, the journal stays resumable
  // When set, the base config (at the full budget) is checked once before any trial; a failure
  // is the search's error, and no trial runs.
  ConfigCheck check_config;
  // Distributed: when set and size() > 1, rank 0 schedules and the others run trials (every rank
  // calls RunTune with the same config). Null or size 1: threads in this process.
  Communicator* comm = nullptr;
};

// One trial of the search: which configuration, at which rung and budget, and how it ended.
struct TuneRow {
  int64_t config = 0;
  int rung = 0;
  int64_t budget = 0;
  std::vector<std::pair<std::string, std::string>> params;  // field → value, dimension order
  bool ok = false;
  double metric = 0;  // the objective (ok rows)
  EvalMetrics eval;
  int64_t steps = 0;
  double seconds = 0;
  int attempts = 0;
  std::string error;  // failed rows
  std::string dir;    // relative to the workdir
};

// The search's outcome: every trial, ranked within its rung, and which one won.
struct TuneResult {
  // Finished and failed trials: by rung (highest first), best metric first within a rung, failed
  // rows last.
  std::vector<TuneRow> rows;
  std::optional<size_t> best;  // index into rows: the best trial of the highest rung reached
  std::string metric_name;     // "GAP@20", "Hit@1", ...
  std::string results_csv;     // path
  std::string best_config;     // path; empty when no trial finished
  int64_t planned = 0;         // trials the search meant to run
  bool interrupted = false;
};

// Runs the search. InvalidArgument (before any trial) for a search that cannot run: no eval_data
// in the base, a bad dimension, budget or algorithm setting; FailedPrecondition for a workdir
// that already holds another search's journal (or any journal, without resume).
Result<TuneResult> RunTune(const TuneConfigFile& config, const TuneOptions& options,
                           const TrialRunner& runner);

// The results table as text (one row per trial, the columns of results.csv).
std::string FormatTuneTable(const TuneResult& result, size_t max_rows = 20);

}  // namespace reel::core

#endif  // REEL_CORE_TUNE_H_
