// `reel train --config FILE|URI [--set section.field=value ...] [--resume] [--quiet|--verbose]
// [--print-config]`.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "args.h"
#include "cli.h"
#include "interrupt.h"
#include "train_cli.h"

namespace reel::cli {
namespace {

std::string FourDecimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

void PrintEval(CliEnv& env, const core::EvalMetrics& m) {
  env.out << "eval: GAP@" << m.top_k << " " << FourDecimals(m.gap) << "  Hit@1 "
          << FourDecimals(m.hit_at_1) << "  PERR " << FourDecimals(m.perr) << "  mAP "
          << FourDecimals(m.map) << "  (" << m.videos << " videos)\n";
}

// This rank's TimeBreakdown in one line: seconds and share of each part, and the largest.
void PrintTime(CliEnv& env, const core::TimeBreakdown& t) {
  env.out << "time of this rank:";
  const char* sep = " ";
  for (const auto& [name, seconds] : t.parts()) {
    env.out << sep << name << " "
            << fmt::format("{:.2f} s ({:.0f}%)", seconds,
                           100.0 * seconds / std::max(t.total, 1e-9));
    sep = ", ";
  }
  env.out << fmt::format(" of {:.2f} s; the most: {}\n", t.total, t.largest());
}

// REEL_RESTART_COUNT, which `reel launch --max-restarts` gives the ranks of each attempt (0 for
// the first); 0 when unset.
Result<int64_t> RestartCount() {
  const char* v = std::getenv("REEL_RESTART_COUNT");
  if (v == nullptr || *v == '\0') return int64_t{0};
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || errno != 0 || n < 0)
    return InvalidArgumentError("REEL_RESTART_COUNT=\"" + std::string(v) +
                                "\" is not a number of restarts (0, 1, ...)");
  return static_cast<int64_t>(n);
}

// A restarted attempt of a launch resumes from the newest checkpoint, when there is one, as
// --resume does (docs/distributed.md, "Restarts"): true when it should.
Result<bool> ResumesAsARestart(CliEnv& env, const core::ConfigFile& cfg) {
  REEL_ASSIGN_OR_RETURN(int64_t restart, RestartCount());
  if (restart == 0) return false;
  const std::string& dir = cfg.config.trainer().checkpoint_dir();
  env.err << "reel train: restart " << restart << " of the launch (REEL_RESTART_COUNT=" << restart
          << "): "
          << (dir.empty() ? "no trainer.checkpoint_dir, so training from the start"
                          : "resuming from the newest checkpoint in " + dir +
                                ", from the start if there is none")
          << "\n";
  return !dir.empty();
}

}  // namespace

Result<core::ConfigFile> LoadConfigWithOverrides(CliEnv& env, const std::string& path,
                                                 const std::vector<std::string>& overrides) {
  REEL_ASSIGN_OR_RETURN(core::ConfigFile cfg, core::LoadConfigFile(env.host.storage(), path));
  REEL_RETURN_IF_ERROR(ApplyOverrides(env, cfg, overrides));
  return cfg;
}

Status ApplyOverrides(CliEnv& env, core::ConfigFile& cfg,
                      const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) REEL_RETURN_IF_ERROR(core::ApplyOverride(cfg, o));
  return env.host.ApplyRunConfig(cfg);
}

Status TrainAndReport(CliEnv& env, const core::ConfigFile& cfg, bool resume, int verbosity,
                      core::TrainResult* out) {
  InterruptScope interrupt;  // SIGINT and SIGTERM finish the step and checkpoint
  core::TrainJobOptions job;
  job.resume = resume;
  job.verbosity = verbosity;
  job.tty = env.err_is_tty;
  job.progress = &env.err;
  job.should_stop = [](int64_t) { return InterruptScope::Poll(); };
  REEL_ASSIGN_OR_RETURN(core::TrainResult r, core::RunTrainJob(env.host, cfg, job));
  if (out) *out = r;
  if (verbosity >= 1 && r.served_only) {
    env.out << "served parameters until every worker finished\n";
  } else if (verbosity >= 1) {
    if (r.resumed && r.steps_this_run == 0 && !r.interrupted) {
      // No loss to report: nothing was trained.
      env.out << "nothing left to train: the checkpoint had reached the budget (" << r.steps
              << " steps, epoch " << r.epoch
              << "); raise trainer.steps or trainer.epochs (--set) to train on\n";
    } else {
      // Ranks that step on their own each report their steps, epoch and loss; only the lead
      // knows every worker's examples.
      env.out << "trained " << r.steps << " steps (";
      if (r.examples_complete)
        env.out << r.examples << " examples" << (r.independent ? " by all workers" : "") << ", ";
      env.out << "epoch " << r.epoch << "), final loss " << FourDecimals(r.last_loss);
      if (r.independent)
        env.out << (r.examples_complete ? " (steps, epoch and loss: this worker's)"
                                        : " (this worker's; the lead worker reports the examples)");
      env.out << "\n";
    }
    if (r.steps_this_run > 0) PrintTime(env, r.time);
    if (r.final_eval) PrintEval(env, *r.final_eval);
    if (!r.last_checkpoint.empty()) env.out << "checkpoint: " << r.last_checkpoint << "\n";
    if (r.checkpoint_failures > 0)
      env.out << "checkpoints not written: " << r.checkpoint_failures
              << " (trainer.on_checkpoint_failure: continue; the newest: "
              << r.last_checkpoint_error << ")\n";
    // Training ranks dropped during the run (an optimizer whose ranks step independently).
    for (const core::LostRank& l : r.lost_ranks) {
      // After the newest of its steps that reached the parameters, if the optimizer could tell.
      env.out << "lost rank " << l.rank << " after step "
              << (l.applied_step >= 0 ? l.applied_step : l.last_step);
      if (l.steps_not_trained >= 0) env.out << ": " << l.steps_not_trained << " steps";
      if (l.examples_not_trained >= 0)
        env.out << " (about " << l.examples_not_trained << " examples)";
      if (l.steps_not_trained >= 0) env.out << " of its share not trained";
      env.out << "\n";
    }
  }
  if (r.interrupted) {
    // Every rank stops; only the lead writes the run's checkpoint.
    const std::string next = cfg.config.trainer().checkpoint_dir().empty()
                                 ? " (no checkpoint_dir set)"
                             : r.last_checkpoint.empty()
                                 ? "; the lead rank writes the checkpoint: continue with --resume"
                                 : "; continue with --resume";
    return CancelledError("interrupted at step " + std::to_string(r.steps) + next);
  }
  return Status::Ok();
}

CliCommand TrainCliCommand() {
  return {
      "train", "train a model from a config (text-format RunConfig)",
      "reel train --config FILE|URI [--set section.field=value ...] [--resume] [--quiet|--verbose] "
      "[--print-config]",
      [](CliEnv& env, const std::vector<std::string>& words) -> Status {
        Args args;
        args.Value("config")
            .Value("set", true)
            .Switch("resume")
            .Switch("quiet")
            .Switch("verbose")
            .Switch("print-config");
        REEL_RETURN_IF_ERROR(args.Parse(words));
        if (!args.positional().empty())
          return InvalidArgumentError("unexpected argument '" + args.positional()[0] +
                                      "' (flags: --config ...)");
        if (!args.Has("config")) return InvalidArgumentError("flag '--config' is required");
        REEL_ASSIGN_OR_RETURN(core::ConfigFile cfg,
                              LoadConfigWithOverrides(env, args.Get("config"), args.GetAll("set")));
        if (args.Has("print-config")) {
          env.out << core::ConfigToText(cfg.config);
          return Status::Ok();
        }
        const int verbosity = args.Has("quiet") ? 0 : args.Has("verbose") ? 2 : 1;
        REEL_ASSIGN_OR_RETURN(const bool restarted, ResumesAsARestart(env, cfg));
        env.arguments_accepted = true;
        return TrainAndReport(env, cfg, args.Has("resume") || restarted, verbosity);
      }};
}

}  // namespace reel::cli
