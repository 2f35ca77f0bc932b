// The trainer's side of training ranks that step independently (RankRoles::TrainsIndependently;
// reel/core/trainer.h): no collective among them. Each reports to the lead (worker_reports.h);
// a rank that finds the lead lost asks RankRoles::LeadAfter who leads now and follows it, or
// takes over; at the end the lead learns what of each lost rank's work reached the parameters
// (RankRoles::AppliedWorkOf). The trainer's loop asks this object where ranks that step together
// would run a collective, so the protocol and the optimizer's roles stay out of the loop.
//
// Thread-safety: one thread (the rank's trainer).
#ifndef REEL_CORE_SRC_TRAIN_INDEPENDENT_RANKS_H_
#define REEL_CORE_SRC_TRAIN_INDEPENDENT_RANKS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reel/rank_roles.h"
#include "train/worker_reports.h"

namespace reel::core {

class IndependentRanks {
 public:
  // Called on a rank that takes over a lost lead, before it gathers the others' reports (the
  // trainer opens the lead's logs); `note` says who took over from whom.
  using TakeOverFn = std::function<Status(const std::string& note)>;

  // Collective over `group` (the training ranks): learns every one's world rank.
  static Result<std::unique_ptr<IndependentRanks>> Join(Communicator& group, int world_rank,
                                                        RankRoles& roles,
                                                        std::chrono::milliseconds timeout,
                                                        TakeOverFn take_over);

  // This rank is the lead (rank 0 of the group, or the one that took over from a lost lead).
  bool leads() const { return group_.rank() == lead_; }
  // The others' reports as this rank knows them (all of them on the lead).
  const WorkerReports& reports() const { return reports_; }

  // Sends `mine` to the lead, following its successor if it was lost; on the lead (perhaps since
  // just now), tells the others and reads their reports: kStart and kFinal wait for each,
  // kCheckpoint takes what has arrived.
  Status Report(const WorkerReport& mine);
  // This rank's end after its last step (`final`, its final report): true if it leads, and must
  // evaluate, write the final checkpoint and Release() the others; false once the lead ended.
  Result<bool> End(const WorkerReport& final);
  // The lead, after the final checkpoint: the others may leave.
  void Release(const WorkerReport& end);
  // The lead: the ranks lost so far (`budget_steps`: every rank's budget, 0 if unknown), counted
  // from what reached the parameters where the optimizer can tell.
  Result<std::vector<LostRank>> Lost(int64_t budget_steps);
  // A log line about lost rank `l`.
  static std::string Describe(const LostRank& l);
  // The whole job's examples in this session: the optimizer's count of the updates applied, or
  // else `own` (this rank's) plus what the others reported to the lead.
  Result<int64_t> JobExamples(int64_t own);

 private:
  IndependentRanks(Communicator& group, std::vector<int> members, RankRoles& roles,
                   std::chrono::milliseconds timeout, TakeOverFn take_over)
      : group_(group),
        members_(std::move(members)),
        roles_(roles),
        timeout_(timeout),
        take_over_(std::move(take_over)),
        reports_(group, timeout) {}
  // The lead did not answer (`why`): asks the optimizer who leads now and follows it, taking
  // over if it is this rank. Unchanged if the optimizer sees the lead alive and `why` was silence.
  Status FollowLead(const Status& why);
  Status TakeOver(int lost, const Status& why);
  std::string Name(int group_rank) const;

  Communicator& group_;
  const std::vector<int> members_;  // world rank by group rank
  RankRoles& roles_;
  const std::chrono::milliseconds timeout_;
  const TakeOverFn take_over_;
  WorkerReports reports_;
  int lead_ = 0;  // the lead's group rank
};

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_INDEPENDENT_RANKS_H_
