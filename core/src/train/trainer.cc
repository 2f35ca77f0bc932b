// The training loop (see reel/core/trainer.h).
#include "reel/core/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <memory>
#include <sstream>
#include <utility>

#include "reel/core/checkpoint.h"
#include "reel/core/evaluator.h"
#include "reel/core/loss.h"
#include "reel/core/rank_agreement.h"
#include "train/commits.h"
#include "train/gradient_check.h"
#include "train/independent_ranks.h"
#include "train/nonfinite.h"
#include "train/progress.h"
#include "train/run_log.h"
#include "train/shared_checkpoint.h"
#include "train/worker_reports.h"

namespace reel::core {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// Adds the seconds of its scope to one part of a TimeBreakdown.
class Timed {
 public:
  explicit Timed(double& part) : part_(part) {}
  ~Timed() { part_ += SecondsSince(start_); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  double& part_;
  const SteadyClock::time_point start_ = SteadyClock::now();
};

std::string Fixed(double v, int digits = 4) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

class Loop {
 public:
  Loop(const TrainerOptions& o, const RankComponents& r, StorageResolver& s)
      : o_(o),
        r_(r),
        group_(r.group != nullptr ? r.group : r.comm),
        roles_(r.optimizer != nullptr ? r.optimizer->rank_roles() : nullptr),
        trains_(roles_ == nullptr || !roles_->IsServerOnly()),
        storage_(s),
        progress_(trains_ && group_->rank() == 0 ? o.progress : nullptr, o.tty, o.verbosity) {}
  ~Loop() {
    if (model_sink_ != nullptr) r_.model->SetGradientSink(nullptr);
  }

  Result<TrainResult> Run();

 private:
  // The lead: rank 0 of the training ranks, or the one that took over from a lost lead; it logs,
  // reports and writes checkpoints.
  bool lead() const {
    return trains_ && (independent_ ? independent_->leads() : group_->rank() == 0);
  }
  // The training ranks (all ranks unless the optimizer has server-only ranks).
  int world() const { return group_->size(); }

  Status Init();
  // `append`: a rank taking over a lost lead's logs adds to them.
  Status OpenLogs(bool append = false);
  Result<bool> ResumeFromCheckpoint();
  // The state a resume starts from, named in `uri`: the newest checkpoint, or with commits the
  // newest of it and every rank's newest commit (train/commits.h).
  Result<CheckpointState> LoadResumeState(std::string* uri);
  Status TrainStep(const Batch& batch);
  // Where the model reports finished gradient ranges in this step (Model::SetGradientSink): the
  // optimizer's sink (through the non-finite check when it is on) when nothing of the trainer's
  // writes the gradient between Backward() and Step() and a stop is decided after Step(), so no
  // rank leaves a step with ranges in flight; null otherwise, and for a step whose loss is not
  // finite (its gradient is marked after Backward()).
  GradientSink* StepSink(bool loss_finite);
  Status StepWithoutData();
  // trainer.stop_on_nonfinite: ranks that step together reduce their gradients in the optimizer,
  // so they check the reduced gradient after Step(): one rank's NaN is every rank's there, and
  // all stop at the same step. A lone rank and independent ones check before Step(), so nothing
  // non-finite is applied or pushed. Both through the gradient's norm, which the clip computes.
  bool ChecksAfterStep() const { return world() > 1 && !independent_; }
  // After Step() on ranks that step together: the norm of the reduced gradient an optimizer that
  // clips reports (Optimizer::last_gradient_norm, finite iff every element is), else a pass over
  // the arena's gradient, which a synchronous optimizer reduces in place.
  bool ReducedGradientFinite() const {
    return optimizer_clips_ ? std::isfinite(last_grad_norm_) : AllFinite(r_.arena->grads());
  }
  // The error that stops the run at `step` (by default the one being taken); `what`: what is
  // not finite.
  Status NonFinite(const std::string& what, int64_t step = -1);
  // Before a checkpoint: parameters that are not finite (an infinite learning rate makes them so
  // from finite gradients) stop the run instead of being written. Every rank that steps with the
  // others holds the same parameters, so all decide alike without a word.
  Status CheckParamsFinite();
  // The learning rate of the step about to be taken on `examples`, told to the optimizer's roles.
  float BeginStep(int64_t examples);
  // Brings the arena to the newest parameters (RankRoles::Refresh).
  Status Refresh(const char* before);
  Status LogWindow();
  Status RunEval();
  // Gathers every rank's position and has the lead write the checkpoint of this step.
  // `periodic`: one of the checkpoint_every_steps cadence, whose failed write
  // on_checkpoint_failure "continue" survives; a run's last checkpoint is never periodic.
  Status SaveCheckpoint(const std::string& my_position, bool periodic = false);
  // Where every training rank's data stands: its position, the epoch that is in and its steps
  // taken there (ranks that step independently differ in all three).
  struct RankPositions {
    std::vector<std::string> positions;
    std::vector<int64_t> epochs, steps;
  };
  // Ranks that step together, before the lead reads the state of this step (a checkpoint's or a
  // commit's): the optimizer refreshed and its state gathered, every rank's data position on the
  // lead. `before` names what for, in errors.
  Result<RankPositions> InStepPositions(const std::string& my_position, const char* before);
  // The lead's part of SaveCheckpoint, with the ranks' positions: no collective, so the lead
  // alone may redo it.
  Status WriteCheckpoint(RankPositions ranks, bool periodic);
  // The lead's: the state of this step, as checkpoints and commits hold it.
  Result<CheckpointState> StateOfThisStep(RankPositions ranks);
  // trainer.commit_every_steps: every rank keeps the lead's encoding of this step's state.
  Status Commit();
  // The epoch this rank's data position is in. A run that met its epoch budget counted the
  // epoch's end without starting the next; a resume with a larger budget sees that end again
  // and counts it then (counting it twice would skip a whole epoch).
  int64_t PositionEpoch() const { return epoch_ - (ended_on_epoch_budget_ ? 1 : 0); }
  // Sums `values` over ranks in place (no-op for one rank).
  Status SumOverRanks(std::span<float> values);
  // Ranks that step together (not TrainsIndependently) check that they have the same schedule.
  Status AgreeOnSchedule();
  // `worker_examples_per_sec`: this rank's own, shown beside the whole job's with several ranks.
  ProgressSnapshot Snapshot(double loss, double examples_per_sec,
                            double worker_examples_per_sec) const;
  // The examples the whole job trained on so far in this session: ranks that step together count
  // every rank's batch at each step (exactly, with their per-step agreement); independent ranks
  // ask the optimizer what the parameter holders applied of every rank's updates, or without its
  // answer add this rank's own to what the others reported.
  Result<int64_t> JobExamples();
  int64_t ProjectedSteps() const;

  Result<TrainResult> Serve();
  // Independent training ranks (see reel/core/trainer.h): joins them and reports this rank's
  // start to the lead.
  Status StartIndependently();
  WorkerReport MyReport(ReportKind kind, const std::string& position) const;
  // This rank became the lead of independent ranks (IndependentRanks::TakeOverFn).
  Status TakeOverLead(const std::string& note);
  // The end of an independent rank's run: the lead waits for every other rank's final report
  // (or its loss), evaluates, writes the final checkpoint and reports the lost ranks.
  Status FinishIndependently(bool interrupted, const std::string& position_before);

  const TrainerOptions& o_;
  const RankComponents& r_;
  Communicator* group_;     // the training ranks; not owned
  RankRoles* const roles_;  // the optimizer's, null if it gives ranks no roles; not owned
  const bool trains_;       // false on a server-only rank
  // Set when the training ranks step on their own (see reel/core/trainer.h), from the start.
  std::unique_ptr<IndependentRanks> independent_;
  StorageResolver& storage_;
  Progress progress_;
  std::optional<LrSchedule> schedule_;
  std::unique_ptr<CheckpointManager> checkpoints_;
  std::unique_ptr<CommitStore> commits_;  // trainer.commit_every_steps > 0
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<EventWriter> events_;
  TrainResult result_;

  TimeBreakdown time_;         // this rank's, this call
  TimeBreakdown window_time_;  // time_ at the start of the logging window
  int64_t step_ = 0, epoch_ = 0, examples_ = 0;
  int64_t steps_per_epoch_ = 0;         // known after the first full epoch
  int64_t epoch_start_step_ = 0;        // step_ when the current epoch began (or resumed)
  bool ended_on_epoch_budget_ = false;  // the last epoch's end was counted, the next not started
  int64_t eval_round_ = 0;
  double prior_seconds_ = 0.0;  // training time of earlier sessions (resume)
  SteadyClock::time_point start_ = SteadyClock::now();
  int64_t session_start_step_ = 0;
  int64_t session_start_examples_ = 0;  // examples_ then: the run's, from a resumed checkpoint
  // The current logging window (this rank).
  SteadyClock::time_point window_start_ = SteadyClock::now();
  double window_loss_sum_ = 0.0;  // sum of loss * batch size
  int64_t window_examples_ = 0;
  // The whole job's examples in this session: so far (ranks that step together), and
  // JobExamples() when the window began (its rate counts from there).
  int64_t job_examples_ = 0, window_job_start_ = 0;
  double last_lr_ = 0.0, last_grad_norm_ = 0.0;
  // The training ranks of the run's first session (a resumed one's from its state), and what
  // trainer.learning_rate.scaling multiplies the schedule's rate by at this size.
  int start_world_ = 0;
  double lr_factor_ = 1.0;
  // The optimizer clips (e.g. "sync", after its allreduce); otherwise the trainer clips this
  // rank's gradient before Step().
  bool optimizer_clips_ = false;
  bool stopped_nonfinite_ = false;                     // NonFinite() ended the run
  GradientSink* model_sink_ = nullptr;                 // what the model was last given
  std::unique_ptr<CheckedGradientSink> checked_sink_;  // built with the first step that needs it
  int64_t last_eval_step_ = -1, last_checkpoint_step_ = -1;
  // The lead: the step of a periodic checkpoint that could not be written and was not written
  // since (-1: none), and the ranks' positions it had; the run's end writes it.
  int64_t unwritten_step_ = -1;
  RankPositions unwritten_;
};

Status Loop::SumOverRanks(std::span<float> values) {
  if (world() == 1 || independent_) return Status::Ok();
  return group_->AllReduce(values, ReduceOp::kSum, DeadlineIn(o_.timeout));
}

// What decides when ranks that step together enter their collectives: a rank with another
// budget or cadence would wait in a collective the others never enter, and the run would end
// only at the deadline, naming no cause (as PyTorch's DDP checks the parameter shapes of its
// processes first, this checks the schedule; the parameter counts are the optimizer's check).
Status Loop::AgreeOnSchedule() {
  const auto flag = [](bool set) { return std::string(set ? "1" : "0"); };
  const RankSettings schedule = {
      {"trainer.steps", std::to_string(o_.steps)},
      {"trainer.epochs", std::to_string(o_.steps == 0 ? o_.epochs : 0)},  // unused under steps
      {"trainer.log_every_steps", std::to_string(o_.log_every_steps)},
      {"trainer.eval_every_steps", std::to_string(o_.eval_every_steps)},
      {"trainer.checkpoint_every_steps", std::to_string(o_.checkpoint_every_steps)},
      {"trainer.commit_every_steps", std::to_string(o_.commit_every_steps)},
      {"--resume (1) or not (0)", flag(o_.resume)},
      {"trainer.checkpoint_dir set (1) or not (0)", flag(!o_.checkpoint_dir.empty())},
      {"eval_data given (1) or not (0)", flag(r_.eval != nullptr)}};
  return CheckRanksAgree(*r_.comm, schedule,
                         "ranks that step together would wait in each other's collectives until "
                         "the deadline. Give every rank the same config",
                         o_.timeout)
      .WithContext("trainer");
}

Status Loop::OpenLogs(bool append) {
  if (!lead()) return Status::Ok();
  if (!o_.metrics_log.empty()) {
    REEL_ASSIGN_OR_RETURN(auto sink,
                          AppendSink::Open(storage_, o_.metrics_log, !o_.resume && !append));
    metrics_ = std::make_unique<MetricsLog>(std::move(sink));
  }
  if (!o_.tensorboard_dir.empty()) {
    REEL_ASSIGN_OR_RETURN(events_, EventWriter::Create(storage_, o_.tensorboard_dir));
  }
  return Status::Ok();
}

Result<bool> Loop::ResumeFromCheckpoint() {
  std::string uri;
  Result<CheckpointState> state = LoadResumeState(&uri);
  if (!state.ok()) {
    if (state.status().code() == StatusCode::kNotFound) {
      progress_.Note("resume: " + state.status().message() + "; starting from scratch");
      return false;
    }
    return state.status();
  }
  if (static_cast<int>(state->data_positions.size()) != state->world_size)
    return DataLossError(uri + ": checkpoint has " + std::to_string(state->data_positions.size()) +
                         " data positions for " + std::to_string(state->world_size) + " ranks");
  // The epoch of each position: ranks that step independently may be epochs apart. A checkpoint
  // from before data_epochs has every position in the lead's.
  std::vector<int64_t> epochs = state->data_epochs;
  if (epochs.empty()) epochs.assign(state->data_positions.size(), state->epoch);
  std::vector<int64_t> steps = state->data_steps;
  if (steps.empty()) steps.assign(state->data_positions.size(), state->step);
  if (epochs.size() != state->data_positions.size() || steps.size() != state->data_positions.size())
    return DataLossError(uri + ": checkpoint has " + std::to_string(epochs.size()) +
                         " data epochs and " + std::to_string(steps.size()) + " data steps for " +
                         std::to_string(state->world_size) + " ranks");
  // Check everything before changing anything: parameters last-but-one, the data position last.
  // Parameters and optimizer state are the same on every rank, so they carry over to any number
  // of ranks; the data positions of all saving ranks are handed to the source when it changed.
  // This rank's: the epoch its data resumes in, and its steps taken there.
  int64_t epoch = state->epoch, step = state->step;
  REEL_RETURN_IF_ERROR(RestoreParams(*state, o_.model_name, *r_.arena, uri));
  REEL_RETURN_IF_ERROR(r_.optimizer->Setup(*r_.arena, *r_.comm));
  REEL_RETURN_IF_ERROR(r_.optimizer->RestoreState(state->optimizer_state).WithContext(uri));
  if (!trains_) {
    // A server-only rank reads no data.
  } else if (state->world_size == world()) {
    REEL_RETURN_IF_ERROR(r_.train->Restore(state->data_positions[group_->rank()]).WithContext(uri));
    epoch = epochs[static_cast<size_t>(group_->rank())];
    step = steps[static_cast<size_t>(group_->rank())];
  } else {
    // Positions in different epochs resume the earliest (DataSource::RestoreResharded).
    epoch = *std::min_element(epochs.begin(), epochs.end());
    Status s = r_.train->RestoreResharded(state->data_positions);
    if (s.code() == StatusCode::kUnimplemented)
      return FailedPreconditionError(uri + ": checkpoint was written by " +
                                     std::to_string(state->world_size) + " ranks, this run has " +
                                     std::to_string(world()) + ", and " + s.message());
    REEL_RETURN_IF_ERROR(s.WithContext(uri + " (written by " + std::to_string(state->world_size) +
                                       " ranks, resumed on " + std::to_string(world()) + ")"));
  }
  step_ = step;
  epoch_ = epoch;
  examples_ = state->examples_seen;
  start_world_ = state->start_world_size > 0 ? state->start_world_size : state->world_size;
  prior_seconds_ = state->train_seconds;
  result_.resumed = true;
  progress_.Note("resumed from " + uri + " at step " + std::to_string(step_));
  return true;
}

Result<CheckpointState> Loop::LoadResumeState(std::string* uri) {
  // Several ranks resume from what rank 0 reads, so ranks with their own disks cannot diverge.
  auto from_disk = [&]() -> Result<CheckpointState> {
    return r_.comm->size() == 1 ? checkpoints_->LoadNewest(uri)
                                : LoadNewestFromRank0(*checkpoints_, *r_.comm, o_.timeout, uri);
  };
  if (!commits_) return from_disk();
  // One gather tells every rank rank 0's newest checkpoint on disk and every rank's newest
  // commit, so all choose alike. A report: "DISK COMMIT\nCODE ERROR\n" and a refused commit a
  // line.
  CommitStore::Newest mine = commits_->FindNewest();
  int64_t disk = -1;
  Status listed = Status::Ok();
  if (r_.comm->rank() == 0) {
    Result<std::vector<std::pair<int64_t, std::string>>> list = checkpoints_->List();
    if (!list.ok()) listed = list.status();
    if (list.ok() && !list->empty()) disk = list->back().first;
  }
  std::string report = std::to_string(disk) + " " + std::to_string(mine.step) + "\n" +
                       std::to_string(static_cast<int>(listed.code())) + " " + listed.message() +
                       "\n";
  for (const std::string& r : mine.refused) report += r + "\n";
  REEL_ASSIGN_OR_RETURN(std::vector<std::string> reports,
                        GatherBytes(*r_.comm, report, o_.timeout));
  int64_t disk_step = -1;
  std::vector<int64_t> commit_steps;
  std::vector<std::string> refused;
  for (size_t r = 0; r < reports.size(); ++r) {
    std::istringstream in(reports[r]);
    int64_t d = -1, c = -1;
    int code = 0;
    std::string line;
    in >> d >> c >> code;
    std::getline(in, line);  // the error, after the code's space
    if (r == 0 && code != 0)
      return Status(static_cast<StatusCode>(code), line.empty() ? line : line.substr(1))
          .WithContext("resume: rank 0 listing " + o_.checkpoint_dir);
    if (r == 0) disk_step = d;
    commit_steps.push_back(c);
    while (std::getline(in, line))  // ranks of one host read the same files: each named once
      if (std::find(refused.begin(), refused.end(), line) == refused.end()) refused.push_back(line);
  }
  for (const std::string& r : refused)
    progress_.Note("resume: refused a commit that does not decode (" + r +
                   "); the next newest state is taken");
  const ResumeChoice choice = ChooseNewest(disk_step, commit_steps);
  if (choice.source != ResumeChoice::Source::kCommit) return from_disk();
  const std::string holder = "rank " + std::to_string(choice.holder);
  std::string path = mine.path, bytes;
  if (r_.comm->rank() == choice.holder) bytes = std::move(mine.bytes);
  REEL_RETURN_IF_ERROR(BroadcastBytes(*r_.comm, path, choice.holder, o_.timeout)
                           .WithContext("resume: " + holder + "'s commit"));
  REEL_RETURN_IF_ERROR(BroadcastBytes(*r_.comm, bytes, choice.holder, o_.timeout)
                           .WithContext("resume: " + holder + "'s commit"));
  *uri = "commit " + path + " (" + holder + "'s)";
  progress_.Note("resume: the commit of step " + std::to_string(choice.step) + " is newer than " +
                 (disk_step < 0 ? std::string("any checkpoint")
                                : "the newest checkpoint, step " + std::to_string(disk_step)));
  return DecodeCheckpoint(bytes, *uri);
}

Status Loop::Init() {
  if ((trains_ && !r_.train) || !r_.model || !r_.arena || !r_.optimizer || !r_.comm)
    return InvalidArgumentError("trainer: a rank component is missing");
  const bool independent = roles_ != nullptr && roles_->TrainsIndependently();
  if (independent && r_.group == nullptr)
    return InvalidArgumentError(
        "trainer: the optimizer's training ranks step independently but no training group was "
        "split off");
  if (!r_.arena->finalized()) return FailedPreconditionError("trainer: arena is not finalized");
  if (o_.steps < 0 || (o_.steps == 0 && o_.epochs <= 0))
    return InvalidArgumentError(
        "trainer: set trainer.steps or trainer.epochs to a positive number");
  if (o_.num_classes < 1)
    return InvalidArgumentError("trainer: num_classes must be >= 1, got " +
                                std::to_string(o_.num_classes));
  if (o_.eval_top_k < 1)
    return InvalidArgumentError("trainer: eval_top_k must be >= 1, got " +
                                std::to_string(o_.eval_top_k));
  if (o_.on_checkpoint_failure != "stop" && o_.on_checkpoint_failure != "continue")
    return InvalidArgumentError(
        "trainer: on_checkpoint_failure must be \"stop\" or \"continue\", got \"" +
        o_.on_checkpoint_failure + "\"");
  if (o_.lr_scaling != "none" && o_.lr_scaling != "linear")
    return InvalidArgumentError(
        "trainer: learning_rate.scaling must be \"none\" or \"linear\", got \"" + o_.lr_scaling +
        "\"");
  if (o_.lr_reference_ranks < 0)
    return InvalidArgumentError(
        "trainer: learning_rate.reference_ranks must be >= 0 (0: the ranks the run started "
        "with), got " +
        std::to_string(o_.lr_reference_ranks));
  if (o_.commit_every_steps < 0)
    return InvalidArgumentError("trainer: commit_every_steps must be >= 0 (0: no commits), got " +
                                std::to_string(o_.commit_every_steps));
  if (o_.commit_every_steps > 0) {
    if (o_.checkpoint_dir.empty())
      return InvalidArgumentError(
          "trainer: commit_every_steps needs trainer.checkpoint_dir: the checkpoints stay the "
          "durable state, and a resume takes a commit only when it is newer than them");
    if (independent || (roles_ != nullptr && roles_->HasServerOnlyRanks()))
      return InvalidArgumentError(
          "trainer: commit_every_steps needs ranks that step together; this optimizer's ranks "
          "do not (its own checkpoints keep its state)");
    if (o_.commit_dir.empty())
      return InvalidArgumentError("trainer: commit_every_steps needs a commit_dir");
    commits_ = std::make_unique<CommitStore>(
        o_.commit_dir, CommitPrefix(o_.commit_job, o_.checkpoint_dir), r_.comm->rank());
  }
  if (!independent) REEL_RETURN_IF_ERROR(AgreeOnSchedule());
  LrScheduleConfig lr = o_.learning_rate;
  if (lr.total_steps == 0 && lr.total_epochs == 0) {  // unset: the run's own budget
    lr.total_steps = o_.steps;
    if (lr.total_steps == 0) lr.total_epochs = o_.epochs;
  }
  REEL_ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(lr));
  schedule_ = std::move(schedule);
  if (!o_.checkpoint_dir.empty())
    checkpoints_ =
        std::make_unique<CheckpointManager>(storage_, o_.checkpoint_dir, o_.keep_checkpoints);
  if (o_.resume && !checkpoints_)
    return InvalidArgumentError("--resume needs trainer.checkpoint_dir");
  optimizer_clips_ = r_.optimizer->AcceptGradientClipping(o_.clip_norm);
  if (checkpoints_ && roles_)
    roles_->OfferCheckpoints(
        {&storage_, o_.checkpoint_dir, o_.checkpoint_every_steps, o_.keep_checkpoints, o_.resume});
  bool resumed = false;
  if (o_.resume) {
    REEL_ASSIGN_OR_RETURN(resumed, ResumeFromCheckpoint());
  }
  // A run that starts afresh abandons what its job committed before: a restart of it must not
  // take an earlier run's state. (Its first commit comes after a step every rank takes.)
  if (commits_ && !o_.resume) commits_->RemoveAll();
  if (!resumed) {
    REEL_RETURN_IF_ERROR(r_.model->Initialize(o_.seed));
    REEL_RETURN_IF_ERROR(r_.optimizer->Setup(*r_.arena, *r_.comm));
  }
  session_start_step_ = epoch_start_step_ = step_;
  session_start_examples_ = examples_;
  if (start_world_ == 0) start_world_ = world();
  if (o_.lr_scaling == "linear") {
    // Said at every start, so each restart at another size shows the rate it trains at.
    const bool given = o_.lr_reference_ranks > 0;
    const int64_t reference = given ? o_.lr_reference_ranks : start_world_;
    lr_factor_ = static_cast<double>(world()) / static_cast<double>(reference);
    progress_.Note("learning rate x" + Fixed(lr_factor_) +
                   " (trainer.learning_rate.scaling: linear): " + std::to_string(world()) +
                   " training ranks against " + std::to_string(reference) +
                   (given ? " (reference_ranks)" : " (the ranks the run started with)"));
  }
  return OpenLogs();
}

GradientSink* Loop::StepSink(bool loss_finite) {
  if (!optimizer_clips_ || (o_.stop_on_nonfinite && (!ChecksAfterStep() || !loss_finite)))
    return nullptr;
  GradientSink* sink = r_.optimizer->gradient_sink();
  if (sink == nullptr || !o_.stop_on_nonfinite) return sink;
  if (!checked_sink_) checked_sink_ = std::make_unique<CheckedGradientSink>(*r_.arena, *sink);
  return checked_sink_.get();
}

Status Loop::TrainStep(const Batch& batch) {
  LossResult loss;
  std::string bad;  // what of this rank's is not finite, when checked
  {
    Timed t(time_.compute);
    REEL_ASSIGN_OR_RETURN(Tensor logits, r_.model->Forward(batch, Mode::kTrain));
    REEL_ASSIGN_OR_RETURN(loss, SigmoidCrossEntropy(logits, batch));
    if (GradientSink* sink = StepSink(std::isfinite(loss.loss)); sink != model_sink_) {
      r_.model->SetGradientSink(sink);
      model_sink_ = sink;
    }
    REEL_RETURN_IF_ERROR(r_.model->Backward(batch, loss.dlogits));
    if (o_.stop_on_nonfinite) {
      if (!std::isfinite(loss.loss)) {
        bad = "the loss is " + std::to_string(loss.loss) + " on rank " +
              std::to_string(r_.comm->rank());
      } else if (model_sink_ != nullptr) {
        // Parts of the gradient may be on the wire already: the checking sink saw them first.
        if (std::string at = checked_sink_->EndBackward(); !at.empty())
          bad = "the gradient of parameter " + at + " on rank " + std::to_string(r_.comm->rank());
      } else if (optimizer_clips_ && !AllFinite(r_.arena->grads())) {
        bad = "the gradient of parameter " + FirstNonFinite(*r_.arena, r_.arena->grads()) +
              " on rank " + std::to_string(r_.comm->rank());
      }
    }
    if (!optimizer_clips_) {
      last_grad_norm_ = ClipByGlobalNorm(r_.arena->grads(), o_.clip_norm);
      // The norm is finite iff every element is (squared floats summed in double cannot
      // overflow), and clipping keeps a non-finite element non-finite.
      if (o_.stop_on_nonfinite && bad.empty() && !std::isfinite(last_grad_norm_))
        bad = "the gradient of parameter " + FirstNonFinite(*r_.arena, r_.arena->grads()) +
              " on rank " + std::to_string(r_.comm->rank());
    }
  }
  if (!bad.empty() && !ChecksAfterStep()) return NonFinite(bad);
  // A non-finite loss with finite gradients still stops every rank: the reduction carries it.
  // (Such a step's Backward() had no sink, so element 0 is not on the wire; a non-finite
  // gradient carries itself.)
  if (o_.stop_on_nonfinite && !std::isfinite(loss.loss) && r_.arena->total_size() > 0)
    r_.arena->grads()[0] = std::nanf("");
  {
    Timed t(time_.update);
    REEL_RETURN_IF_ERROR(r_.optimizer->Step(BeginStep(batch.size())));
  }
  if (optimizer_clips_) last_grad_norm_ = r_.optimizer->last_gradient_norm();
  if (o_.stop_on_nonfinite && ChecksAfterStep() && !ReducedGradientFinite())
    return NonFinite(!bad.empty() ? bad
                                  : "the gradient reduced over the ranks (another rank's) at "
                                    "parameter " +
                                        FirstNonFinite(*r_.arena, r_.arena->grads()));
  ++step_;
  window_loss_sum_ += loss.loss * static_cast<double>(batch.size());
  window_examples_ += batch.size();
  return Status::Ok();
}

// Ranks' shares of an epoch may differ by a batch (records do not divide evenly, or a resume
// on another number of ranks split what was left). A rank that has run out contributes zero
// gradients to the step of those that have not, as Horovod's join does: the collectives stay in
// step and no rank's records are dropped.
Status Loop::StepWithoutData() {
  auto grads = r_.arena->grads();
  std::fill(grads.begin(), grads.end(), 0.0f);
  Timed t(time_.update);
  REEL_RETURN_IF_ERROR(r_.optimizer->Step(BeginStep(0)));
  last_grad_norm_ = optimizer_clips_ ? r_.optimizer->last_gradient_norm() : 0.0;
  if (o_.stop_on_nonfinite && ChecksAfterStep() && !ReducedGradientFinite())
    return NonFinite("the gradient reduced over the ranks (another rank's) at parameter " +
                     FirstNonFinite(*r_.arena, r_.arena->grads()));
  ++step_;
  return Status::Ok();
}

Status Loop::NonFinite(const std::string& what, int64_t step) {
  stopped_nonfinite_ = true;
  std::string saved = "no checkpoint was written in this run";
  if (!result_.last_checkpoint.empty())
    saved = "the newest, " + result_.last_checkpoint + " (step " +
            std::to_string(last_checkpoint_step_) + "), is intact and --resume starts from it";
  else if (!lead() && last_checkpoint_step_ >= 0)
    saved = "the newest (step " + std::to_string(last_checkpoint_step_) +
            ") is intact and --resume starts from it";
  return FailedPreconditionError(
      "training stopped at step " + std::to_string(step < 0 ? step_ + 1 : step) + ": " + what +
      " (trainer.stop_on_nonfinite); no checkpoint holds this step: " + saved +
      ". A smaller learning rate or trainer.clip_norm may help; trainer.stop_on_nonfinite: "
      "false trains on");
}

Status Loop::CheckParamsFinite() {
  if (!o_.stop_on_nonfinite || AllFinite(r_.arena->values())) return Status::Ok();
  return NonFinite("the parameters it made are not finite, the first at " +
                       FirstNonFinite(*r_.arena, r_.arena->values()),
                   step_);
}

float Loop::BeginStep(int64_t examples) {
  last_lr_ =
      schedule_->At(roles_ != nullptr ? roles_->ScheduleStep(step_) : step_, epoch_) * lr_factor_;
  if (roles_ != nullptr) roles_->NoteStep(step_ + 1, examples);
  return static_cast<float>(last_lr_);
}

Status Loop::Refresh(const char* before) {
  if (roles_ == nullptr) return Status::Ok();
  return roles_->Refresh().WithContext(before);
}

// The step budget, or for an epoch budget the steps so far plus what the epochs left take at
// the first epoch's count. Ranks' shares of an epoch may differ by a batch from epoch to epoch
// (async_sgd's workers, a resume on other ranks), so this epoch counts at least its steps so far:
// the projection never falls below the step reached. 0 while unknown.
int64_t Loop::ProjectedSteps() const {
  if (o_.steps > 0) return o_.steps;
  if (steps_per_epoch_ == 0) return 0;
  const int64_t left = o_.epochs - epoch_;  // the current epoch included
  if (left <= 0) return step_;
  return std::max(step_, epoch_start_step_ + steps_per_epoch_) + (left - 1) * steps_per_epoch_;
}

ProgressSnapshot Loop::Snapshot(double loss, double examples_per_sec,
                                double worker_examples_per_sec) const {
  ProgressSnapshot s;
  s.epoch = epoch_;
  s.step = step_;
  s.loss = loss;
  s.lr = last_lr_;
  s.examples_per_sec = examples_per_sec;
  if (world() > 1) s.worker_examples_per_sec = worker_examples_per_sec;
  const int64_t total = ProjectedSteps();
  s.total_steps = total;
  const double elapsed = SecondsSince(start_);
  const int64_t done = step_ - session_start_step_;
  if (total > 0 && done > 0) s.eta_seconds = elapsed / static_cast<double>(done) * (total - step_);
  return s;
}

Result<int64_t> Loop::JobExamples() {
  if (!independent_) return job_examples_;
  return independent_->JobExamples(examples_ + window_examples_ - session_start_examples_);
}

// The window's loss (over every rank's examples), its whole job's rate (JobExamples) and this
// rank's own rate; the progress line, the log line, the metrics log, TensorBoard and on_event
// all give these same figures.
Status Loop::LogWindow() {
  float sums[2] = {static_cast<float>(window_loss_sum_), static_cast<float>(window_examples_)};
  REEL_RETURN_IF_ERROR(SumOverRanks(sums));
  const double seconds = std::max(1e-9, SecondsSince(window_start_));
  const double loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  // Every independent rank follows the whole job's count, since any may take over the lead.
  int64_t job = window_job_start_;
  if (lead() || independent_) {
    REEL_ASSIGN_OR_RETURN(job, JobExamples());
  }
  const double rate = static_cast<double>(job - window_job_start_) / seconds;
  const double worker_rate = static_cast<double>(window_examples_) / seconds;
  examples_ += static_cast<int64_t>(sums[1]);
  window_loss_sum_ = 0.0;
  window_examples_ = 0;
  window_job_start_ = job;
  window_start_ = SteadyClock::now();
  const TimeBreakdown spent = time_ - window_time_;
  window_time_ = time_;
  if (sums[1] == 0) return Status::Ok();  // nothing trained since the last line
  result_.last_loss = loss;
  if (!lead()) return Status::Ok();
  progress_.Log(Snapshot(loss, rate, worker_rate));
  if (o_.on_event) {
    TrainEvent e;
    e.step = step_;
    e.epoch = epoch_;
    e.loss = loss;
    e.lr = last_lr_;
    e.examples_per_sec = rate;
    e.worker_examples_per_sec = worker_rate;
    e.grad_norm = last_grad_norm_;
    o_.on_event(e);
  }
  if (metrics_) {
    REEL_RETURN_IF_ERROR(metrics_->Write({{"step", step_},
                                          {"epoch", epoch_},
                                          {"wall_time", WallTime()},
                                          {"elapsed", prior_seconds_ + SecondsSince(start_)},
                                          {"loss", loss},
                                          {"lr", last_lr_},
                                          {"examples_per_sec", rate},
                                          {"worker_examples_per_sec", worker_rate},
                                          {"grad_norm", last_grad_norm_},
                                          {"data_seconds", spent.data},
                                          {"compute_seconds", spent.compute},
                                          {"update_seconds", spent.update},
                                          {"wait_seconds", spent.wait},
                                          {"evaluation_seconds", spent.evaluation},
                                          {"checkpoint_seconds", spent.checkpoint}}));
    REEL_RETURN_IF_ERROR(metrics_->Flush());
  }
  if (events_) {
    REEL_RETURN_IF_ERROR(
        events_->WriteScalars(step_, {{"train/loss", loss},
                                      {"train/learning_rate", last_lr_},
                                      {"train/examples_per_sec", rate},
                                      {"train/worker_examples_per_sec", worker_rate},
                                      {"train/grad_norm", last_grad_norm_}}));
    REEL_RETURN_IF_ERROR(events_->Flush());
  }
  return Status::Ok();
}

Status Loop::RunEval() {
  // Independent ranks: the lead alone, on the whole evaluation set (the host gives every training
  // rank one, since any may take over from a lost lead).
  if (r_.eval == nullptr || (independent_ && !lead())) return Status::Ok();
  Timed t(time_.evaluation);
  REEL_RETURN_IF_ERROR(Refresh("before evaluation"));
  REEL_RETURN_IF_ERROR(r_.eval->StartEpoch(eval_round_++));
  Model* models[] = {r_.model};
  REEL_ASSIGN_OR_RETURN(EvalMetrics m, Evaluate(models, *r_.eval, o_.num_classes, o_.eval_top_k,
                                                independent_ ? nullptr : group_, o_.timeout));
  result_.final_eval = m;
  result_.evals.emplace_back(step_, m);
  last_eval_step_ = step_;
  if (!lead()) return Status::Ok();
  progress_.Note("eval @ step " + std::to_string(step_) + ": GAP " + Fixed(m.gap) + "  Hit@1 " +
                 Fixed(m.hit_at_1) + "  PERR " + Fixed(m.perr) + "  mAP " + Fixed(m.map) + "  (" +
                 std::to_string(m.videos) + " videos)");
  if (o_.on_event) {
    TrainEvent e;
    e.kind = TrainEvent::Kind::kEval;
    e.step = step_;
    e.epoch = epoch_;
    e.eval = m;
    o_.on_event(e);
  }
  if (metrics_) {
    // What the job had trained when it scored this: the same count as the rates'.
    REEL_ASSIGN_OR_RETURN(const int64_t job, JobExamples());
    REEL_RETURN_IF_ERROR(metrics_->Write({{"step", step_},
                                          {"wall_time", WallTime()},
                                          {"job_examples", static_cast<double>(job)},
                                          {"eval_gap", m.gap},
                                          {"eval_hit_at_1", m.hit_at_1},
                                          {"eval_perr", m.perr},
                                          {"eval_map", m.map},
                                          {"eval_videos", static_cast<double>(m.videos)}}));
    REEL_RETURN_IF_ERROR(metrics_->Flush());
  }
  if (events_) {
    REEL_RETURN_IF_ERROR(events_->WriteScalars(step_, {{"eval/gap", m.gap},
                                                       {"eval/hit_at_1", m.hit_at_1},
                                                       {"eval/perr", m.perr},
                                                       {"eval/map", m.map}}));
    REEL_RETURN_IF_ERROR(events_->Flush());
  }
  return Status::Ok();
}

Status Loop::SaveCheckpoint(const std::string& my_position, bool periodic) {
  if (!checkpoints_) return Status::Ok();
  Timed t(time_.checkpoint);
  if (!independent_) REEL_RETURN_IF_ERROR(CheckParamsFinite());
  last_checkpoint_step_ = step_;
  RankPositions ranks;
  if (independent_) {
    // The lead takes the other ranks' newest reported positions, without waiting for slower
    // ones; a rank that takes over a lost lead here goes on as the lead.
    REEL_RETURN_IF_ERROR(independent_->Report(MyReport(ReportKind::kCheckpoint, my_position)));
    if (!lead()) return Status::Ok();
    REEL_RETURN_IF_ERROR(Refresh("before a checkpoint"));
    REEL_RETURN_IF_ERROR(CheckParamsFinite());
    const WorkerReports& reports = independent_->reports();
    ranks.positions = reports.Positions(my_position);
    ranks.epochs = reports.Epochs(PositionEpoch());
    ranks.steps = reports.Steps(step_);
  } else {
    REEL_ASSIGN_OR_RETURN(ranks, InStepPositions(my_position, "before a checkpoint"));
  }
  if (!lead()) return Status::Ok();
  return WriteCheckpoint(std::move(ranks), periodic);
}

Result<Loop::RankPositions> Loop::InStepPositions(const std::string& my_position,
                                                  const char* before) {
  REEL_RETURN_IF_ERROR(Refresh(before));
  REEL_RETURN_IF_ERROR(r_.optimizer->GatherState().WithContext(before));
  RankPositions ranks;
  REEL_ASSIGN_OR_RETURN(ranks.positions, GatherBytes(*group_, my_position, o_.timeout));
  ranks.epochs.assign(ranks.positions.size(), PositionEpoch());  // in step: one epoch
  ranks.steps.assign(ranks.positions.size(), step_);
  return ranks;
}

Result<CheckpointState> Loop::StateOfThisStep(RankPositions ranks) {
  CheckpointState s;
  s.model_name = o_.model_name;
  // The state first: an optimizer whose state lives on other ranks (parameter servers that
  // others keep updating) brings the arena to the parameters of the state's own instant.
  REEL_ASSIGN_OR_RETURN(s.optimizer_state, r_.optimizer->SaveState());
  s.CaptureParams(*r_.arena);
  s.step = step_;
  s.epoch = PositionEpoch();  // the lead's
  s.schedule_step = step_;
  s.data_positions = std::move(ranks.positions);
  s.data_epochs = std::move(ranks.epochs);
  s.data_steps = std::move(ranks.steps);
  s.config_text = o_.config_text;
  s.seed = o_.seed;
  s.examples_seen = independent_ ? examples_ + window_examples_ + independent_->reports().Examples()
                                 : examples_ + window_examples_ * world();
  s.world_size = world();
  s.wall_time = WallTime();
  s.train_seconds = prior_seconds_ + SecondsSince(start_);
  s.start_world_size = start_world_;
  return s;
}

Status Loop::Commit() {
  Timed t(time_.checkpoint);
  REEL_RETURN_IF_ERROR(CheckParamsFinite());
  REEL_ASSIGN_OR_RETURN(std::string position, r_.train->Position());
  REEL_ASSIGN_OR_RETURN(RankPositions ranks, InStepPositions(position, "before a commit"));
  // The lead's encoding for every rank: an optimizer may hold its whole state on the lead alone
  // ("sync" with zero_stage 1), and the ranks' commits of one step are then the same bytes.
  std::string bytes;
  if (lead()) {
    REEL_ASSIGN_OR_RETURN(CheckpointState s, StateOfThisStep(std::move(ranks)));
    bytes = EncodeCheckpoint(s);
  }
  const std::string what = "the commit of step " + std::to_string(step_);
  REEL_RETURN_IF_ERROR(BroadcastBytes(*group_, bytes, 0, o_.timeout).WithContext(what));
  // One that cannot be kept (a full tmpfs) leaves the previous one: a restart then loses more.
  if (Status s = commits_->Write(bytes); !s.ok())
    progress_.Note(what + " was not kept; training on: " + s.ToString());
  return Status::Ok();
}

Status Loop::WriteCheckpoint(RankPositions ranks, bool periodic) {
  REEL_ASSIGN_OR_RETURN(CheckpointState s, StateOfThisStep(std::move(ranks)));
  Result<std::string> written = checkpoints_->Save(s);
  if (!written.ok()) {
    if (!periodic || o_.on_checkpoint_failure != "continue") return written.status();
    // The previous checkpoints are intact (CheckpointManager::Save); the next one tries again.
    ++result_.checkpoint_failures;
    result_.last_checkpoint_error = written.status().ToString();
    unwritten_step_ = step_;
    unwritten_ = {std::move(s.data_positions), std::move(s.data_epochs), std::move(s.data_steps)};
    progress_.Note("the checkpoint of step " + std::to_string(step_) +
                   " was not written; training on (trainer.on_checkpoint_failure: continue): " +
                   result_.last_checkpoint_error);
    return Status::Ok();
  }
  result_.last_checkpoint = *std::move(written);
  unwritten_step_ = -1;
  progress_.Note("checkpoint " + result_.last_checkpoint, 2);
  return Status::Ok();
}

// A server-only rank: set up like the others (so a resume restores its part of the state), then
// serve until the training ranks are done.
Result<TrainResult> Loop::Serve() {
  REEL_RETURN_IF_ERROR(
      roles_->Serve().WithContext("rank " + std::to_string(r_.comm->rank()) + " serving"));
  REEL_RETURN_IF_ERROR(r_.optimizer->Finish());
  result_.steps = step_;
  result_.steps_this_run = step_ - session_start_step_;
  result_.epoch = epoch_;
  result_.served_only = true;
  return result_;
}

WorkerReport Loop::MyReport(ReportKind kind, const std::string& position) const {
  WorkerReport r;
  r.kind = kind;
  r.rank = r_.comm->rank();
  r.step = step_;
  r.start_step = session_start_step_;
  r.examples = examples_ + window_examples_ - session_start_examples_;  // this session's
  r.epoch = PositionEpoch();
  r.position = position;
  return r;
}

Status Loop::StartIndependently() {
  REEL_ASSIGN_OR_RETURN(
      independent_,
      IndependentRanks::Join(*group_, r_.comm->rank(), *roles_, o_.timeout,
                             [this](const std::string& note) { return TakeOverLead(note); }));
  // The newest parameters, from ranks that serve them (a rank that also serves a shard starts
  // serving here, so that the others need not wait for its first step).
  REEL_RETURN_IF_ERROR(Refresh("before the first step"));
  REEL_ASSIGN_OR_RETURN(std::string start, r_.train->Position());
  return independent_->Report(MyReport(ReportKind::kStart, start));
}

Status Loop::TakeOverLead(const std::string& note) {
  progress_ = Progress(o_.progress, o_.tty, o_.verbosity);
  progress_.Note(note);
  return OpenLogs(/*append=*/true);
}

Status Loop::FinishIndependently(bool interrupted, const std::string& position_before) {
  std::string position = position_before;
  if (!interrupted) {
    REEL_ASSIGN_OR_RETURN(position, r_.train->Position());
  }
  REEL_ASSIGN_OR_RETURN(const bool leads,
                        independent_->End(MyReport(ReportKind::kFinal, position)));
  if (!leads) return r_.optimizer->Finish();
  const int64_t budget =
      o_.steps > 0 ? o_.steps : (steps_per_epoch_ > 0 ? steps_per_epoch_ * o_.epochs : 0);
  REEL_ASSIGN_OR_RETURN(result_.lost_ranks, independent_->Lost(budget));
  for (const LostRank& l : result_.lost_ranks) progress_.Note(IndependentRanks::Describe(l));
  if (interrupted) {
    progress_.Note("interrupted at step " + std::to_string(step_) + "; saving a checkpoint");
  } else {
    // After every rank's final push, so the evaluation and the checkpoint see all of them.
    REEL_RETURN_IF_ERROR(RunEval());
  }
  REEL_RETURN_IF_ERROR(SaveCheckpoint(position));
  // The others may leave now.
  independent_->Release(MyReport(ReportKind::kEnd, position));
  return Status::Ok();
}

Result<TrainResult> Loop::Run() {
  REEL_RETURN_IF_ERROR(Init());
  if (!trains_) return Serve();
  const SteadyClock::time_point began = SteadyClock::now();
  if (roles_ != nullptr && roles_->TrainsIndependently() && world() > 1)
    REEL_RETURN_IF_ERROR(StartIndependently());
  int64_t batches_this_epoch = 0;
  // False while in the epoch a checkpoint resumed in the middle of: its earlier batches are not
  // counted here, and what is left of it may be nothing at all.
  bool whole_epoch = !result_.resumed;
  bool interrupted = false;
  std::string position_before;  // this rank's position before the batch in hand
  while (o_.steps == 0 || step_ < o_.steps) {
    const SteadyClock::time_point asked = SteadyClock::now();
    REEL_ASSIGN_OR_RETURN(position_before, r_.train->Position());
    Result<Batch> batch = r_.train->Next();
    time_.data += SecondsSince(asked);
    if (!batch.ok() && batch.status().code() != StatusCode::kOutOfRange)
      return batch.status().WithContext("rank " + std::to_string(r_.comm->rank()) +
                                        ": training data");
    const bool stop = o_.should_stop && o_.should_stop(step_);
    // Ranks agree on leaving the epoch and on stopping, so their collectives stay in step
    // (independent ranks decide alone).
    // The third: the step's examples over every rank, for the whole job's rate.
    float agree[3] = {batch.ok() ? 1.0f : 0.0f, stop ? 1.0f : 0.0f,
                      batch.ok() ? static_cast<float>(batch->size()) : 0.0f};
    {
      Timed t(time_.wait);
      REEL_RETURN_IF_ERROR(SumOverRanks(agree));
    }
    if (agree[1] > 0) {
      interrupted = true;
      break;
    }
    if (agree[0] == 0) {
      if (whole_epoch && batches_this_epoch == 0)
        return FailedPreconditionError("training data yields no batch in epoch " +
                                       std::to_string(epoch_));
      if (whole_epoch && steps_per_epoch_ == 0) steps_per_epoch_ = batches_this_epoch;
      REEL_RETURN_IF_ERROR(
          r_.optimizer->EndEpoch(epoch_).WithContext("end of epoch " + std::to_string(epoch_)));
      whole_epoch = true;
      batches_this_epoch = 0;
      ++epoch_;
      epoch_start_step_ = step_;
      if (o_.steps == 0 && epoch_ >= o_.epochs) {
        ended_on_epoch_budget_ = true;
        break;
      }
      REEL_RETURN_IF_ERROR(r_.train->StartEpoch(epoch_));
      continue;
    }
    // A rank whose share of the epoch is done joins the others' steps until theirs are too.
    // (A non-finite stop names its step itself.)
    if (Status s = batch.ok() ? TrainStep(*batch) : StepWithoutData(); !s.ok())
      return stopped_nonfinite_ ? s : s.WithContext("step " + std::to_string(step_));
    job_examples_ += static_cast<int64_t>(agree[2]);
    ++batches_this_epoch;
    // The live line's rates are those of the window so far, as its log line will give them.
    if (lead() && progress_.Due()) {
      const double secs = std::max(1e-9, SecondsSince(window_start_));
      REEL_ASSIGN_OR_RETURN(const int64_t job, JobExamples());
      progress_.Tick(Snapshot(window_examples_ > 0 ? window_loss_sum_ / window_examples_ : 0.0,
                              static_cast<double>(job - window_job_start_) / secs,
                              static_cast<double>(window_examples_) / secs));
    }
    if (o_.log_every_steps > 0 && step_ % o_.log_every_steps == 0)
      REEL_RETURN_IF_ERROR(LogWindow());
    if (o_.eval_every_steps > 0 && step_ % o_.eval_every_steps == 0)
      REEL_RETURN_IF_ERROR(RunEval());
    if (o_.checkpoint_every_steps > 0 && step_ % o_.checkpoint_every_steps == 0) {
      REEL_ASSIGN_OR_RETURN(std::string pos, r_.train->Position());
      REEL_RETURN_IF_ERROR(SaveCheckpoint(pos, /*periodic=*/true));
    }
    if (commits_ && step_ % o_.commit_every_steps == 0) REEL_RETURN_IF_ERROR(Commit());
  }
  // Every rank took the same path out of the loop, so these collectives match up.
  if (window_examples_ > 0 || world() > 1) REEL_RETURN_IF_ERROR(LogWindow());
  if (independent_) {
    REEL_RETURN_IF_ERROR(FinishIndependently(interrupted, position_before));
  } else if (interrupted) {
    progress_.Note("interrupted at step " + std::to_string(step_) + "; saving a checkpoint");
    REEL_RETURN_IF_ERROR(SaveCheckpoint(position_before));
  } else {
    if (last_eval_step_ != step_) REEL_RETURN_IF_ERROR(RunEval());
    if (last_checkpoint_step_ != step_) {
      REEL_ASSIGN_OR_RETURN(std::string pos, r_.train->Position());
      REEL_RETURN_IF_ERROR(SaveCheckpoint(pos));
    } else if (lead() && unwritten_step_ == step_) {
      // The periodic checkpoint of the last step failed, and it is the run's last: nothing has
      // changed since it was taken, so the lead writes it again alone, and a failure stops.
      REEL_RETURN_IF_ERROR(WriteCheckpoint(std::move(unwritten_), false));
    }
  }
  // (An independent rank other than the lead finished its optimizer before its final report.)
  if (!independent_ || lead()) REEL_RETURN_IF_ERROR(r_.optimizer->Finish());
  if (commits_) {
    // Once the lead has written the last checkpoint (this agreement waits for it), every commit is
    // older than it: the run's commits go.
    float written = 1.0f;
    REEL_RETURN_IF_ERROR(SumOverRanks({&written, 1}).WithContext("after the last checkpoint"));
    commits_->RemoveAll();
  }
  progress_.Finish();
  result_.steps = step_;
  result_.steps_this_run = step_ - session_start_step_;
  result_.examples = examples_ + (independent_ ? independent_->reports().Examples() : 0);
  result_.independent = independent_ != nullptr;
  result_.examples_complete = !independent_ || lead();
  result_.epoch = epoch_;
  result_.interrupted = interrupted;
  result_.time = time_;
  result_.time.total = SecondsSince(began);
  return result_;
}

}  // namespace

Result<TrainResult> RunTrainer(const TrainerOptions& options, const RankComponents& rank,
                               StorageResolver& storage) {
  if (rank.comm == nullptr) return InvalidArgumentError("trainer: no communicator");
  Loop loop(options, rank, storage);
  return loop.Run();
}

}  // namespace reel::core
