// RankRoles: the optional part of an optimizer (Optimizer::rank_roles) that gives ranks roles:
// server-only ranks, and training ranks that step independently. A synchronous optimizer has
// none; the trainer asks for this interface once and runs its independent-rank protocol only
// through it (reel/core/trainer.h).
//
// Why a separate interface: these calls exist only for state that lives on other ranks
// (parameter servers), and every default below is what an optimizer without such state does.
// Server-only ranks: the host splits the training ranks into their own group for data shards and
// checkpoint positions, and calls Serve() on the others. Independent training ranks have no
// per-step collective and may leave an epoch at different steps; they report to their lead, the
// lowest training rank, and the calls from NoteStep() on let the lead count what reached the
// parameters and let the others agree on a new lead when it is lost. OfferCheckpoints() lets
// each rank write its own part of the state (Optimizer::SaveState gathers it on the lead).
//
// The answers of IsServerOnly() may differ by rank; HasServerOnlyRanks(), TrainsIndependently()
// and LeadAfter() must be the same on every rank. Thread-safety: that of its optimizer.
#ifndef REEL_RANK_ROLES_H_
#define REEL_RANK_ROLES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "reel/status.h"
#include "reel/storage.h"

namespace reel {

// The run's checkpoint directory, offered before Setup() (RankRoles::OfferCheckpoints).
struct OptimizerCheckpoints {
  StorageResolver* storage = nullptr;  // outlives the optimizer
  std::string dir;                     // trainer.checkpoint_dir: a URI or path
  int64_t every_steps = 0;             // trainer.checkpoint_every_steps (0: only at the end)
  int keep = 0;                        // trainer.keep_checkpoints (<= 0: all)
  bool resume = false;                 // this run resumes (reel train --resume)
};

// What the parameter holders applied of one lost training rank's work (RankRoles::AppliedWorkOf).
struct AppliedWork {
  int64_t step = 0;      // the trainer's step (resumes counted) after its newest applied update
  int64_t steps = 0;     // steps its applied updates carried
  int64_t examples = 0;  // examples those steps trained on
  int64_t updates = 0;   // updates applied
};

// The roles an optimizer gives ranks; its life and reasons are in the file comment.
class RankRoles {
 public:
  virtual ~RankRoles() = default;

  // This rank only serves and does not train.
  virtual bool IsServerOnly() const { return false; }
  // Some rank of the world is server-only.
  virtual bool HasServerOnlyRanks() const { return false; }
  // The training ranks step on their own, with no per-step collective among them.
  virtual bool TrainsIndependently() const { return HasServerOnlyRanks(); }
  // Server-only ranks, after Setup(): answers the training ranks until all of them finished.
  virtual Status Serve() { return UnimplementedError("this optimizer has no serve loop"); }
  // Called on every rank before Setup() when the run has a checkpoint directory.
  virtual void OfferCheckpoints(const OptimizerCheckpoints& checkpoints) { (void)checkpoints; }

  // The step the learning-rate schedule is evaluated at: e.g. the updates applied by all ranks.
  virtual int64_t ScheduleStep(int64_t local_step) const { return local_step; }
  // Brings arena.values() to the newest parameters, before an evaluation or a checkpoint.
  virtual Status Refresh() { return Status::Ok(); }

  // Before each Step(): the trainer's step once it is done (resumes counted) and its batch's
  // examples (0 without data), for the optimizer to carry with its updates.
  virtual void NoteStep(int64_t step, int64_t examples) {
    (void)step;
    (void)examples;
  }
  // The lead, at the end, for a training rank it lost (`rank` in the world): what of its work
  // reached the parameters; nullopt if unknown (the trainer counts from its last report).
  virtual Result<std::optional<AppliedWork>> AppliedWorkOf(int rank) {
    (void)rank;
    return std::optional<AppliedWork>();
  }
  // The examples of every training rank's updates applied so far in this session (NoteStep's);
  // nullopt if unknown (the trainer adds up what the ranks reported).
  virtual Result<std::optional<int64_t>> ExamplesApplied() { return std::optional<int64_t>(); }
  // The world rank of the training rank that leads after `lost`; `lost` itself if the parameter
  // holders still see it alive; nullopt if unknown (the run then stops naming the lost lead).
  virtual Result<std::optional<int>> LeadAfter(int lost) {
    (void)lost;
    return std::optional<int>();
  }
};

}  // namespace reel

#endif  // REEL_RANK_ROLES_H_
