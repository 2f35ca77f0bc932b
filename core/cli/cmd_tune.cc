// `reel tune --config SEARCH [--workdir DIR] [--resume] [--parallel N] [--set field=value ...]`:
// a hyperparameter search (reel/core/tune.h), trials in parallel, a resumable journal, a results
// table, results.csv and best.pbtxt in the workdir.
#include <fstream>
#include <sstream>

#include "args.h"
#include "cli.h"
#include "interrupt.h"
#include "launched_ranks.h"
#include "reel/core/tune.h"

namespace reel::cli {
namespace {

Result<core::TuneConfigFile> LoadTuneConfig(const std::string& path,
                                            const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open the search config");
  std::stringstream text;
  text << in.rdbuf();
  REEL_ASSIGN_OR_RETURN(core::TuneConfigFile f, core::ParseTuneConfig(text.str(), path));
  for (const std::string& o : overrides) REEL_RETURN_IF_ERROR(core::ApplyOverride(f.base, o));
  *f.tune.mutable_base() = f.base.config;
  return f;
}

// A search that ended with no result at all: an error, with the first trial's reason.
Status NoTrialSucceeded(const core::TuneResult& r) {
  std::string why = "no trial succeeded (" + std::to_string(r.rows.size()) + " failed)";
  if (!r.rows.empty()) why += "; the first: " + r.rows.front().error;
  return FailedPreconditionError(why);
}

}  // namespace

CliCommand TuneCliCommand() {
  return {
      "tune", "hyperparameter search: grid, random or ASHA trials in parallel, resumable",
      "reel tune --config SEARCH.pbtxt [--workdir DIR] [--resume] [--parallel N] "
      "[--set section.field=value ...] [--quiet|--verbose]",
      [](CliEnv& env, const std::vector<std::string>& words) -> Status {
        Args args;
        args.Value("config").Value("workdir").Value("parallel").Value("set", true);
        args.Switch("resume").Switch("quiet").Switch("verbose");
        REEL_RETURN_IF_ERROR(args.Parse(words));
        if (!args.positional().empty())
          return InvalidArgumentError("unexpected argument '" + args.positional()[0] +
                                      "' (flags: --config ...)");
        if (!args.Has("config")) return InvalidArgumentError("flag '--config' is required");
        REEL_ASSIGN_OR_RETURN(core::TuneConfigFile cfg,
                              LoadTuneConfig(args.Get("config"), args.GetAll("set")));
        core::TuneOptions options;
        if (args.Has("workdir")) options.workdir = args.Get("workdir");
        options.resume = args.Has("resume");
        if (args.Has("parallel")) {
          REEL_ASSIGN_OR_RETURN(int64_t n, args.GetInt("parallel", 0));
          if (n < 1 || n > 1024)
            return InvalidArgumentError("--parallel " + std::to_string(n) +
                                        ": must lie in [1, 1024]");
          options.parallel = static_cast<int>(n);
        }
        options.verbosity = args.Has("quiet") ? 0 : args.Has("verbose") ? 2 : 1;
        options.progress = &env.err;
        options.tty = env.err_is_tty;
        InterruptScope interrupt;
        options.should_stop = [] { return InterruptScope::Poll(); };
        options.check_config = core::TrainingConfigCheck(env.host);
        env.arguments_accepted = true;
        // A worker that dies fails its trial, not the search.
        REEL_ASSIGN_OR_RETURN(LaunchedRanks ranks,
                              JoinLaunchedRanks(env, cfg.base.config, /*isolate_failures=*/true));
        options.comm = ranks.comm.get();
        if (ranks.comm && ranks.comm->rank() != 0) {  // a worker: runs trials, prints nothing
          options.verbosity = 0;
          REEL_ASSIGN_OR_RETURN(core::TuneResult ignored,
                                core::RunTune(cfg, options, core::TrainingTrialRunner(env.host)));
          (void)ignored;
          return Status::Ok();
        }
        REEL_ASSIGN_OR_RETURN(core::TuneResult r,
                              core::RunTune(cfg, options, core::TrainingTrialRunner(env.host)));
        if (options.verbosity >= 1) env.out << core::FormatTuneTable(r);
        env.out << "results: " << r.results_csv << "\n";
        if (!r.best_config.empty()) env.out << "best config: " << r.best_config << "\n";
        if (r.interrupted)
          return CancelledError("search interrupted; continue with --resume --workdir " +
                                options.workdir);
        if (!r.best) return NoTrialSucceeded(r);
        return Status::Ok();
      }};
}

}  // namespace reel::cli
