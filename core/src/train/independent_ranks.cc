// Training ranks that step independently (see independent_ranks.h).
#include "train/independent_ranks.h"

#include <algorithm>
#include <map>
#include <optional>
#include <span>

namespace reel::core {
namespace {

// Whether `s` shows a peer lost (or silent past the deadline) rather than a fault of this rank.
bool ShowsLoss(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

}  // namespace

Result<std::unique_ptr<IndependentRanks>> IndependentRanks::Join(Communicator& group,
                                                                 int world_rank, RankRoles& roles,
                                                                 std::chrono::milliseconds timeout,
                                                                 TakeOverFn take_over) {
  // Who is who among the training ranks, for finding a lost lead's successor.
  std::vector<int> members(static_cast<size_t>(group.size()));
  REEL_RETURN_IF_ERROR(group
                           .AllGather(std::as_bytes(std::span<const int>(&world_rank, 1)),
                                      std::as_writable_bytes(std::span<int>(members)),
                                      DeadlineIn(timeout))
                           .WithContext("training ranks exchanging their world ranks"));
  return std::unique_ptr<IndependentRanks>(
      new IndependentRanks(group, std::move(members), roles, timeout, std::move(take_over)));
}

std::string IndependentRanks::Name(int group_rank) const {
  return "training rank " + std::to_string(group_rank) + " (rank " +
         std::to_string(members_[static_cast<size_t>(group_rank)]) + ")";
}

Status IndependentRanks::Report(const WorkerReport& mine) {
  if (!leads()) {
    Status sent = SendWorkerReport(group_, lead_, kWorkerReportTag, mine, timeout_);
    while (!sent.ok() && !leads()) {
      if (!ShowsLoss(sent)) return sent;
      REEL_RETURN_IF_ERROR(FollowLead(sent));
      if (!leads()) sent = SendWorkerReport(group_, lead_, kWorkerReportTag, mine, timeout_);
    }
    if (!leads()) return Status::Ok();
  }
  // The lead (perhaps since just now).
  reports_.TellOthers(mine);
  if (mine.kind == ReportKind::kCheckpoint) return reports_.Poll();
  return reports_.CatchUp(mine.kind == ReportKind::kFinal ? WorkerReports::kFinal : mine.step);
}

Status IndependentRanks::FollowLead(const Status& why) {
  const int lost = lead_;
  const int lost_world = members_[static_cast<size_t>(lost)];
  const std::string who = "the lead (training rank " + std::to_string(lost) + ", rank " +
                          std::to_string(lost_world) + ")";
  Result<std::optional<int>> next = roles_.LeadAfter(lost_world);
  if (!next.ok()) return next.status().WithContext("finding the successor of " + who);
  if (!*next)
    return UnavailableError(
        who +
        " was lost, and this optimizer names no successor: nothing evaluates or writes "
        "checkpoints without it; `reel train --resume` continues from the newest "
        "checkpoint (" +
        why.ToString() + ")");
  if (**next == lost_world) {
    if (why.code() == StatusCode::kDeadlineExceeded) return Status::Ok();  // busy, not lost
    return UnavailableError("training rank " + std::to_string(group_.rank()) + " cannot reach " +
                            who + ", which the optimizer's servers still see alive (" +
                            why.ToString() + ")");
  }
  const auto it = std::find(members_.begin(), members_.end(), **next);
  if (it == members_.end())
    return InternalError("the optimizer named rank " + std::to_string(**next) + " to lead after " +
                         who + ", which is not a training rank");
  lead_ = static_cast<int>(it - members_.begin());
  if (!leads()) return Status::Ok();
  return TakeOver(lost, why);
}

Status IndependentRanks::TakeOver(int lost, const Status& why) {
  REEL_RETURN_IF_ERROR(
      reports_.LoseLead(lost, members_[static_cast<size_t>(lost)], why.ToString()));
  REEL_RETURN_IF_ERROR(take_over_(Name(group_.rank()) + " takes over as the lead from " +
                                  Name(lost) + ", which was lost (" + why.ToString() + ")"));
  // A report from every other rank (each sends its next one here once it finds the old lead
  // gone), so that checkpoints hold every rank's position.
  return reports_.CatchUp(0);
}

Result<bool> IndependentRanks::End(const WorkerReport& final) {
  bool gathered = false;  // this rank gathered the final reports as the lead
  if (!leads()) {
    // Every push of this rank applied first, so that the lead's final pull holds them.
    REEL_RETURN_IF_ERROR(roles_.Refresh().WithContext("before the final report"));
    REEL_RETURN_IF_ERROR(Report(final));
    gathered = leads();
    // The lead's end, after its final checkpoint: a lead lost before it is replaced, and this
    // rank may be the replacement. The caller finishes the optimizer only then, since that may
    // wait for the lead (a rank that also serves a shard serves until every rank is done).
    while (!leads()) {
      Status end = reports_.AwaitEnd(lead_);
      if (end.ok()) return false;
      if (!ShowsLoss(end)) return end;
      REEL_RETURN_IF_ERROR(FollowLead(end));
      if (!leads()) {
        REEL_RETURN_IF_ERROR(Report(final));
        gathered = leads();
      }
    }
  }
  if (!gathered) REEL_RETURN_IF_ERROR(Report(final));
  return true;
}

void IndependentRanks::Release(const WorkerReport& end) { reports_.TellOthers(end); }

Result<std::vector<LostRank>> IndependentRanks::Lost(int64_t budget_steps) {
  // What reached the parameters of each lost rank's work, as the optimizer counted it.
  std::map<int, AppliedWork> applied;
  for (const LostRank& l : reports_.Lost(budget_steps)) {
    if (l.rank < 0) continue;
    Result<std::optional<AppliedWork>> work = roles_.AppliedWorkOf(l.rank);
    if (!work.ok())
      return work.status().WithContext("asking what was applied of lost rank " +
                                       std::to_string(l.rank));
    if (*work) applied[l.rank] = **work;
  }
  return reports_.Lost(budget_steps, applied);
}

std::string IndependentRanks::Describe(const LostRank& l) {
  const std::string what = l.rank >= 0 ? "rank " + std::to_string(l.rank)
                                       : "training rank " + std::to_string(l.group_rank);
  const std::string applied_note = l.applied_step < 0
                                       ? std::string()
                                       : "; its updates reached the parameters up to step " +
                                             std::to_string(l.applied_step) + " (" +
                                             std::to_string(l.applied_updates) + " updates)";
  const std::string share =
      l.steps_not_trained < 0
          ? "the rest of its share after that was not trained"
          : std::to_string(l.steps_not_trained) + " steps of its share" +
                (l.examples_not_trained < 0
                     ? std::string()
                     : " (about " + std::to_string(l.examples_not_trained) + " examples)") +
                " were not trained";
  return "lost " + what + " after its report at step " + std::to_string(l.last_step) +
         applied_note + ": " + share + "; the others finished the run (" + l.why + ")";
}

Result<int64_t> IndependentRanks::JobExamples(int64_t own) {
  REEL_ASSIGN_OR_RETURN(const std::optional<int64_t> applied, roles_.ExamplesApplied());
  if (applied) return *applied;
  // The others' as of their newest reports.
  return own + (leads() ? reports_.Examples() : 0);
}

}  // namespace reel::core
