// The scheduler of a search (reel/core/tune.h): asks the algorithm for trials, starts them on the
// executor's free slots, journals every start and end, and writes the results.
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "executor.h"
#include "journal.h"
#include "reel/core/trainer.h"
#include "reel/core/tune.h"
#include "report.h"
#include "search.h"
#include "search_space.h"
#include "train/thread_budget.h"
#include "trial_dir.h"

namespace reel::core {
namespace {

namespace fs = std::filesystem;
using tune::Assignment;
using tune::TrialSpec;

// FNV-1a over the search's definition (base, dimensions, search, objective): a resume must
// continue the same search. Execution settings (parallelism, retries) may change between runs.
std::string Fingerprint(const config::TuneConfig& c) {
  config::TuneConfig key = c;
  key.clear_execution();
  std::string text;
  google::protobuf::TextFormat::PrintToString(key, &text);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

struct Plan {
  tune::SearchPlan search;
  config::Search::BudgetUnit unit = config::Search::STEPS;
  config::Objective::Metric metric = config::Objective::GAP;
  int top_k = 20;
  int parallel = 1;
  int threads_per_trial = 0;
  int retries = 0;
  bool keep_all_checkpoints = false;
};

Result<Plan> MakePlan(const TuneConfigFile& file, const TuneOptions& options) {
  const config::TuneConfig& c = file.tune;
  const config::RunConfig& base = c.base();
  Plan p;
  if (!base.has_eval_data())
    return InvalidArgumentError(file.base.path +
                                ": the base config has no eval_data section; every trial is "
                                "scored on held-out data");
  p.search.algorithm = c.search().algorithm();
  p.search.seed = c.search().seed();
  p.search.trials = c.search().has_trials() ? c.search().trials() : 16;
  p.unit = c.search().budget_unit();
  const int64_t base_budget =
      p.unit == config::Search::STEPS ? base.trainer().steps() : base.trainer().epochs();
  p.search.max_budget = c.search().has_max_budget() ? c.search().max_budget() : base_budget;
  if (p.search.max_budget < 1)
    return InvalidArgumentError("search.max_budget is unset and the base config's trainer." +
                                std::string(p.unit == config::Search::STEPS ? "steps" : "epochs") +
                                " is not positive: say how long a full trial trains");
  p.search.eta = c.search().has_eta() ? c.search().eta() : 3.0;
  p.search.min_budget =
      c.search().has_min_budget()
          ? c.search().min_budget()
          : std::max<int64_t>(1, std::llround(static_cast<double>(p.search.max_budget) /
                                              (p.search.eta * p.search.eta)));
  p.metric = c.objective().metric();
  // As the trials' own trainers read it (reel/core/trainer_options.h): unset takes the default.
  p.top_k = base.trainer().has_eval_top_k() ? static_cast<int>(base.trainer().eval_top_k())
                                            : TrainerOptions{}.eval_top_k;
  const int cores = CoresAvailable();  // the affinity mask: taskset, cpusets
  int64_t parallel = options.parallel > 0           ? options.parallel
                     : c.execution().has_parallel() ? c.execution().parallel()
                                                    : cores;
  if (parallel < 1)
    return InvalidArgumentError("execution.parallel must be >= 1 (got " + std::to_string(parallel) +
                                ")");
  p.parallel = static_cast<int>(std::min<int64_t>(parallel, 1024));
  p.threads_per_trial = std::max(1, cores / p.parallel);
  p.retries = c.execution().has_retries() ? static_cast<int>(c.execution().retries()) : 0;
  if (p.retries < 0) return InvalidArgumentError("execution.retries must be >= 0");
  p.keep_all_checkpoints = c.execution().keep_checkpoints() == config::Execution::ALL;
  return p;
}

config::TrialRecord MakeRecord(config::TrialRecord::Event event, const TrialSpec& t, int attempt) {
  config::TrialRecord r;
  r.set_event(event);
  r.set_config(t.config);
  r.set_rung(t.rung);
  r.set_budget(t.budget);
  for (const tune::Param& p : t.params) {
    auto* q = r.add_params();
    q->set_field(p.field);
    q->set_value(p.value);
  }
  r.set_attempt(attempt);
  r.set_dir(tune::TrialDirName(t.config, t.rung));
  return r;
}

TrialSpec SpecOf(const config::TrialRecord& r) {
  TrialSpec t{r.config(), r.rung(), r.budget(), {}};
  for (const auto& p : r.params()) t.params.push_back({p.field(), p.value()});
  return t;
}

TuneRow RowFromRecord(const config::TrialRecord& r) {
  TuneRow row;
  row.config = r.config();
  row.rung = r.rung();
  row.budget = r.budget();
  for (const auto& p : r.params()) row.params.emplace_back(p.field(), p.value());
  row.ok = r.event() == config::TrialRecord::FINISHED;
  row.metric = r.metric();
  row.eval = {r.gap(), r.hit_at_1(), r.perr(), r.map(), 0};
  row.steps = r.steps();
  row.seconds = r.seconds();
  row.attempts = r.attempt();
  row.error = r.error();
  row.dir = r.dir();
  return row;
}

// Trains `budget` units of a run whose learning-rate schedule is planned for `planned` units
// (the search's full budget), unless the base config plans it itself. So ASHA's rung-k trial is
// exactly the first r_k units of the full run, whether it got there through the lower rungs'
// checkpoints or from scratch (best.pbtxt): the cosine does not restart at every rung.
void SetBudget(config::Trainer& t, config::Search::BudgetUnit unit, int64_t budget,
               int64_t planned) {
  config::LearningRate& lr = *t.mutable_learning_rate();
  const bool planned_by_base = lr.total_steps() != 0 || lr.total_epochs() != 0;
  if (unit == config::Search::STEPS) {
    t.set_steps(budget);
    if (!planned_by_base) lr.set_total_steps(planned);
  } else {
    t.set_steps(0);
    t.set_epochs(budget);
    if (!planned_by_base) lr.set_total_epochs(planned);
  }
}

// The state of a search in progress, rebuilt from the journal on resume.
class Scheduler {
 public:
  Scheduler(const TuneConfigFile& file, const TuneOptions& options, Plan plan,
            const tune::SearchSpace& space, std::unique_ptr<tune::SearchAlgorithm> search,
            std::unique_ptr<tune::Journal> journal)
      : file_(file),
        options_(options),
        plan_(std::move(plan)),
        space_(space),
        search_(std::move(search)),
        journal_(std::move(journal)),
        fingerprint_(Fingerprint(file.tune)) {
    result_.metric_name = tune::MetricName(plan_.metric, plan_.top_k);
    result_.planned = search_->PlannedTrials();
  }

  // Replays a journal: finished and failed trials become rows and results; trials that only
  // started are queued to run again (continuing from their own checkpoint).
  Status Replay(const std::vector<config::TrialRecord>& records) {
    std::map<std::pair<int64_t, int>, const config::TrialRecord*> last;
    for (const auto& r : records) {
      if (r.event() == config::TrialRecord::STARTED && !r.search().empty() &&
          r.search() != fingerprint_)
        return FailedPreconditionError(
            "journal " + journal_->path() +
            " belongs to a different search (its base, dimensions, search or objective changed); "
            "use another --workdir");
      last[{r.config(), r.rung()}] = &r;
      started_.insert({r.config(), r.rung()});
    }
    for (const auto& r : records) {
      if (last[{r.config(), r.rung()}] != &r) continue;
      const TrialSpec spec = SpecOf(r);
      search_->Adopt(spec);
      if (r.event() == config::TrialRecord::STARTED) {
        rerun_.push_back({spec, r.attempt()});
        continue;
      }
      TuneRow row = RowFromRecord(r);
      search_->Report(spec, row.ok ? std::optional<double>(row.metric) : std::nullopt);
      result_.rows.push_back(std::move(row));
    }
    return TrimCheckpoints();
  }

  Result<TuneResult> Run(tune::Executor& executor) {
    tune::Progress progress(options_.progress, options_.tty, options_.verbosity,
                            result_.metric_name, result_.planned);
    int running = 0;
    while (true) {
      if (executor.slots() == 0)
        return UnavailableError(
            "every worker rank is gone; the journal keeps what finished: rerun with --resume");
      while (running < executor.slots() && !Stopping()) {
        TrialSpec spec;
        int attempt = 1;
        bool rerun = false;
        if (!rerun_.empty()) {
          std::tie(spec, attempt) = rerun_.front();
          rerun_.erase(rerun_.begin());
          rerun = true;
        } else if (auto next = search_->Next()) {
          spec = std::move(*next);
        } else {
          break;
        }
        REEL_ASSIGN_OR_RETURN(bool started,
                              Launch(executor, spec, std::max(1, attempt), rerun, progress));
        if (started) ++running;
      }
      if (running == 0) break;
      tune::Completion done = executor.Wait();
      --running;
      REEL_ASSIGN_OR_RETURN(bool restarted, Finish(executor, std::move(done), progress));
      if (restarted) ++running;
    }
    progress.Finish();
    result_.interrupted = Stopping() || interrupted_;
    return std::move(result_);
  }

 private:
  bool Stopping() const { return options_.should_stop && options_.should_stop(); }

  // Prepares and starts a trial; false when it could not even be prepared (then it is recorded
  // as failed and the search goes on). Errors only for the journal failing.
  Result<bool> Launch(tune::Executor& executor, const TrialSpec& spec, int attempt, bool rerun,
                      tune::Progress& progress) {
    Result<tune::TrialJob> job = Prepare(spec, attempt, rerun);
    if (job.ok()) {
      REEL_RETURN_IF_ERROR(StartJob(executor, std::move(*job), progress));
      return true;
    }
    tune::Completion failed;
    failed.job.spec = spec;
    failed.job.attempt = attempt;
    failed.run = job.status();
    progress.Started(spec, attempt);
    REEL_RETURN_IF_ERROR(Record(std::move(failed), progress));
    return false;
  }

  Result<tune::TrialJob> Prepare(const TrialSpec& spec, int attempt, bool rerun) {
    tune::TrialJob job;
    job.spec = spec;
    job.attempt = attempt;
    REEL_ASSIGN_OR_RETURN(ConfigFile cfg, space_.Apply(file_.base, spec.params));
    SetBudget(*cfg.config.mutable_trainer(), plan_.unit, spec.budget, plan_.search.max_budget);
    job.request.config_text = ConfigToText(cfg.config);
    job.request.threads = options_.comm && options_.comm->size() > 1 ? 0 : plan_.threads_per_trial;
    REEL_ASSIGN_OR_RETURN(job.request.resume, tune::PrepareTrialDir(options_.workdir, spec.config,
                                                                    spec.rung, /*keep=*/rerun));
    job.request.dir =
        (fs::path(options_.workdir) / tune::TrialDirName(spec.config, spec.rung)).string();
    return job;
  }

  Status StartJob(tune::Executor& executor, tune::TrialJob job, tune::Progress& progress) {
    config::TrialRecord r = MakeRecord(config::TrialRecord::STARTED, job.spec, job.attempt);
    r.set_search(fingerprint_);
    REEL_RETURN_IF_ERROR(journal_->Append(r));
    started_.insert({job.spec.config, job.spec.rung});
    progress.Started(job.spec, job.attempt);
    executor.Start(std::move(job));
    return Status::Ok();
  }

  // Handles a completion; true when the trial was started again (a retry).
  Result<bool> Finish(tune::Executor& executor, tune::Completion done, tune::Progress& progress) {
    const bool interrupted =
        done.run.ok() ? done.run->interrupted
                      : (Stopping() && done.run.status().code() == StatusCode::kCancelled);
    if (interrupted) {  // journaled as started only: a resume runs it again
      interrupted_ = true;
      progress.Ended(RowOf(done), true);
      return false;
    }
    if (!done.run.ok() && done.job.attempt <= plan_.retries && !Stopping()) {
      progress.Ended(RowOf(done), true);
      REEL_ASSIGN_OR_RETURN(bool started, Launch(executor, done.job.spec, done.job.attempt + 1,
                                                 /*rerun=*/false, progress));
      return started;
    }
    REEL_RETURN_IF_ERROR(Record(std::move(done), progress));
    return false;
  }

  TuneRow RowOf(const tune::Completion& done) const {
    const TrialSpec& spec = done.job.spec;
    TuneRow row;
    row.config = spec.config;
    row.rung = spec.rung;
    row.budget = spec.budget;
    for (const auto& p : spec.params) row.params.emplace_back(p.field, p.value);
    row.seconds = done.seconds;
    row.attempts = done.job.attempt;
    row.dir = tune::TrialDirName(spec.config, spec.rung);
    if (done.run.ok()) {
      row.ok = true;
      row.eval = done.run->eval;
      row.steps = done.run->steps;
      row.metric = tune::MetricOf(plan_.metric, row.eval);
    } else {
      row.error = done.run.status().ToString();
    }
    return row;
  }

  // The final outcome of a trial: journal, algorithm, progress and results.
  Status Record(tune::Completion done, tune::Progress& progress) {
    TuneRow row = RowOf(done);
    config::TrialRecord r =
        MakeRecord(row.ok ? config::TrialRecord::FINISHED : config::TrialRecord::FAILED,
                   done.job.spec, row.attempts);
    r.set_metric(row.metric);
    r.set_gap(row.eval.gap);
    r.set_hit_at_1(row.eval.hit_at_1);
    r.set_perr(row.eval.perr);
    r.set_map(row.eval.map);
    r.set_steps(row.steps);
    r.set_seconds(row.seconds);
    r.set_error(row.error);
    r.set_worker(done.worker);
    REEL_RETURN_IF_ERROR(journal_->Append(r));
    search_->Report(done.job.spec, row.ok ? std::optional<double>(row.metric) : std::nullopt);
    progress.Ended(row, false);
    result_.rows.push_back(std::move(row));
    return TrimCheckpoints();
  }

  // Deletes what no promotion, retry or resume can need any more (docs/tune.md): the checkpoints
  // of every finished trial except those that may still be promoted, those promoted whose next
  // rung has not ended (a retry or a resume starts from them again) and the best trial so far,
  // which keep their newest checkpoint only. Running and interrupted trials are not touched.
  Status TrimCheckpoints() {
    if (plan_.keep_all_checkpoints) return Status::Ok();
    std::set<std::pair<int64_t, int>> ended;
    const TuneRow* best = nullptr;
    for (const TuneRow& row : result_.rows) {
      ended.insert({row.config, row.rung});
      if (row.ok && (!best || std::tie(row.rung, row.metric, best->config) >
                                  std::tie(best->rung, best->metric, row.config)))
        best = &row;
    }
    for (const TuneRow& row : result_.rows) {
      const std::pair<int64_t, int> next{row.config, row.rung + 1};
      const bool needed =
          row.ok && (&row == best || (started_.count(next) && !ended.count(next)) ||
                     search_->MayPromote(TrialSpec{row.config, row.rung, row.budget, {}}));
      if (trimmed_.count({row.config, row.rung}) && !needed) continue;  // gone already
      REEL_RETURN_IF_ERROR(
          tune::TrimTrialCheckpoints(options_.workdir, row.config, row.rung, needed));
      if (!needed) trimmed_.insert({row.config, row.rung});
    }
    return Status::Ok();
  }

  const TuneConfigFile& file_;
  const TuneOptions& options_;
  Plan plan_;
  const tune::SearchSpace& space_;  // RunTune's, which the search algorithm refers to as well
  std::unique_ptr<tune::SearchAlgorithm> search_;
  std::unique_ptr<tune::Journal> journal_;
  std::string fingerprint_;
  std::vector<std::pair<TrialSpec, int>> rerun_;  // (trial, attempt) interrupted last time
  std::set<std::pair<int64_t, int>> started_;     // (config, rung) ever started
  std::set<std::pair<int64_t, int>> trimmed_;     // (config, rung) whose checkpoints are gone
  TuneResult result_;
  bool interrupted_ = false;
};

Status WriteFile(const fs::path& path, const std::string& content) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out.flush()) return UnavailableError(tmp.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return UnavailableError(path.string() + ": " + ec.message());
  return Status::Ok();
}

// best.pbtxt: the base config with the best trial's values, budget and schedule, ready for
// `reel train`, which then trains what the trial trained and scores what it scored.
Result<std::string> BestConfigText(const TuneConfigFile& file, const tune::SearchSpace& space,
                                   const Plan& plan, const TuneRow& best) {
  Assignment a;
  for (const auto& [field, value] : best.params) a.push_back({field, value});
  REEL_ASSIGN_OR_RETURN(ConfigFile cfg, space.Apply(file.base, a));
  SetBudget(*cfg.config.mutable_trainer(), plan.unit, best.budget, plan.search.max_budget);
  std::string head = "# The best trial of the search in " + file.base.path + ": trial c" +
                     std::to_string(best.config) + "/r" + std::to_string(best.rung) + ", " +
                     tune::MetricName(plan.metric, plan.top_k) + " " + std::to_string(best.metric) +
                     ".\n";
  for (const auto& [field, value] : best.params) head += "#   " + field + " = " + value + "\n";
  return head + ConfigToText(cfg.config);
}

}  // namespace

Result<TuneConfigFile> ParseTuneConfig(std::string_view text, std::string name) {
  TuneConfigFile f;
  std::map<std::string, int> lines;
  REEL_RETURN_IF_ERROR(ParseTextMessage(text, name, f.tune, &lines));
  f.base.config = f.tune.base();
  f.base.path = name;
  for (const auto& [path, line] : lines)
    if (path.rfind("base.", 0) == 0) f.base.lines[path.substr(5)] = line;
  return f;
}

Result<TuneResult> RunTune(const TuneConfigFile& file, const TuneOptions& options,
                           const TrialRunner& runner) {
  REEL_ASSIGN_OR_RETURN(Plan plan, MakePlan(file, options));
  REEL_ASSIGN_OR_RETURN(tune::SearchSpace space, tune::SearchSpace::Create(file.tune, file.base));
  REEL_ASSIGN_OR_RETURN(auto search, tune::CreateSearch(plan.search, space));
  const bool distributed = options.comm != nullptr && options.comm->size() > 1;
  if (distributed && options.comm->rank() != 0) {
    REEL_RETURN_IF_ERROR(tune::RunTuneWorker(*options.comm, runner, options.should_stop));
    TuneResult worker;  // the results live on rank 0
    worker.metric_name = tune::MetricName(plan.metric, plan.top_k);
    return worker;
  }
  if (options.check_config) {
    // Once, before any trial: a base every trial inherits (missing data, an unknown component)
    // would otherwise fail each trial in turn.
    ConfigFile base = file.base;
    SetBudget(*base.config.mutable_trainer(), plan.unit, plan.search.max_budget,
              plan.search.max_budget);
    REEL_RETURN_IF_ERROR(options.check_config(base).WithContext("the base config"));
  }
  std::error_code ec;
  fs::create_directories(options.workdir, ec);
  if (ec) return UnavailableError("workdir " + options.workdir + ": " + ec.message());
  const fs::path journal_path = fs::path(options.workdir) / "journal.jsonl";
  REEL_ASSIGN_OR_RETURN(auto records, tune::ReadJournal(journal_path.string()));
  if (!records.empty() && !options.resume)
    return FailedPreconditionError(journal_path.string() +
                                   " already holds a search: pass --resume to continue it, or "
                                   "choose another --workdir");
  REEL_ASSIGN_OR_RETURN(auto journal, tune::Journal::Open(journal_path.string()));
  Scheduler scheduler(file, options, plan, space, std::move(search), std::move(journal));
  REEL_RETURN_IF_ERROR(scheduler.Replay(records));

  auto executor = distributed
                      ? tune::MakeDistributedExecutor(*options.comm)
                      : tune::MakeThreadExecutor(plan.parallel, runner, options.should_stop);
  REEL_ASSIGN_OR_RETURN(TuneResult result, scheduler.Run(*executor));
  executor.reset();

  tune::RankRows(result);
  result.results_csv = (fs::path(options.workdir) / "results.csv").string();
  REEL_RETURN_IF_ERROR(WriteFile(result.results_csv, tune::ResultsCsv(result)));
  if (result.best) {
    result.best_config = (fs::path(options.workdir) / "best.pbtxt").string();
    REEL_ASSIGN_OR_RETURN(std::string text,
                          BestConfigText(file, space, plan, result.rows[*result.best]));
    REEL_RETURN_IF_ERROR(WriteFile(result.best_config, text));
  }
  return result;
}

}  // namespace reel::core
