// Optimizer: turns this rank's gradients into new parameters, communicating as its algorithm
// needs: "sync" averages gradients over all ranks with allreduce before an update rule;
// "async_sgd" pushes to parameter servers and pulls weights back; others may do anything else.
//
// Life: the factory learns its rank in the world (OptimizerContext), so it can refuse a world it
// cannot run on before any data is opened. The trainer offers gradient clipping
// (AcceptGradientClipping), then Setup() binds the arena and the world's communicator (both
// outlive the optimizer); every step the trainer calls Step(lr) after the model's Backward()
// filled arena.grads(); Finish() ends the algorithm (flushes pending pushes, stops servers).
// SaveState()/RestoreState() carry the optimizer's own state (moments, step counts) through
// checkpoints.
//
// Roles: by default every rank trains. An optimizer with server-only ranks says so on every rank
// (HasServerOnlyRanks) and calls Serve() on server-only ranks. One whose training ranks step
// independently (TrainsIndependently, true with server-only ranks) has the host split the
// training ranks into their own group (Communicator::Split) for data shards and checkpoint
// positions and let them step on their own (no per-step agreement, a lost one is dropped:
// reel/core/trainer.h). The lead (rank 0 of the training group) writes checkpoints: it calls
// Refresh() and CollectState(), which may fetch state from the ranks that hold it, and then takes
// the parameters from arena.values(); on resume every rank gets RestoreState() with the whole
// state and keeps its own part.
//
// Checkpoints of its own: when the run has a checkpoint directory, the trainer offers it to the
// optimizer before Setup() (OfferCheckpoints) with the storage, the cadence and whether this is a
// resume, on every rank. An optimizer whose state lives on several ranks (parameter servers) may
// then have each rank write its own part there on a cadence of its own, and on a resume pick the
// newest complete set of those parts in RestoreState(). The default ignores the offer, so
// optimizers written before it compile and behave as before.
//
// The whole job's examples/s: the lead of training ranks that step independently asks
// ExamplesApplied() for what every rank's applied updates carried (NoteStep's examples).
//
// Lost training ranks: at the end of a run whose training ranks step independently, the lead
// asks AppliedWorkOf() for each rank it lost, so that the share reported as not trained counts
// what reached the parameters (the trainer tells every Step() its step and batch through
// NoteStep()), not only what the rank last reported.
//
// A lost lead: training ranks that step independently and find their lead gone ask LeadAfter()
// who leads now. An optimizer whose parameter holders see every training rank (parameter
// servers) answers the same on every rank: the lowest training rank they still serve, once they
// too have dropped the lost lead. That rank takes over the lead's duties (reel/core/trainer.h).
// The default cannot tell, and the run then stops naming the lost lead.
//
// Thread-safety: one thread per instance.
#ifndef REEL_OPTIMIZER_H_
#define REEL_OPTIMIZER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "reel/param_arena.h"
#include "reel/status.h"
#include "reel/storage.h"
#include "reel/transport.h"

namespace reel {

// What the factory learns about the rank the optimizer will run on.
struct OptimizerContext {
  int rank = 0;
  int world_size = 1;
};

// The run's checkpoint directory, offered to an optimizer (Optimizer::OfferCheckpoints).
struct OptimizerCheckpoints {
  StorageResolver* storage = nullptr;  // outlives the optimizer
  std::string dir;                     // trainer.checkpoint_dir: a URI or path
  int64_t every_steps = 0;             // trainer.checkpoint_every_steps (0: only at the end)
  int keep = 0;                        // trainer.keep_checkpoints (<= 0: all)
  bool resume = false;                 // this run resumes (reel train --resume)
};

// What the ranks that hold the parameters applied of one training rank's work
// (Optimizer::AppliedWorkOf), in the session that lost it.
struct AppliedWork {
  int64_t step = 0;      // the trainer's step (resumes counted) after its newest applied update
  int64_t steps = 0;     // steps its applied updates carried
  int64_t examples = 0;  // examples those steps trained on
  int64_t updates = 0;   // updates applied
};

// A training algorithm built by an OptimizerFactory; its life and roles are in the file comment.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // `comm` has working collectives (the host supplies the core's ring fallbacks).
  virtual Status Setup(ParamArena& arena, Communicator& comm) = 0;
  // Applies this rank's gradients with learning rate `lr`; afterwards arena.values() hold the
  // parameters to use for the next step.
  virtual Status Step(float lr) = 0;
  virtual Status Finish() { return Status::Ok(); }
  // Training ranks leave epoch `epoch` together (an optimizer that communicates once per epoch
  // does it here).
  virtual Status EndEpoch(int64_t /*epoch*/) { return Status::Ok(); }

  // Opaque, versioned by the implementation.
  virtual Result<std::string> SaveState() const = 0;
  virtual Status RestoreState(std::string_view state) = 0;

  // Clipping by global L2 norm (trainer.clip_norm; `max_norm` <= 0: none), offered once before
  // Setup(). An optimizer that returns true clips in Step() where its algorithm makes that right
  // and then reports the norm through last_gradient_norm(): "sync" clips the gradient averaged
  // over all ranks, after the allreduce (as PyTorch DDP users clip after the reduce), so N ranks
  // with batch B step exactly as one rank with batch N*B. One that declines (the default) gets
  // this rank's own gradient, clipped by the trainer before Step().
  virtual bool AcceptGradientClipping(double max_norm) {
    (void)max_norm;
    return false;
  }
  // The global L2 norm, before clipping, of the gradient the last Step() applied (0 before the
  // first). Read by the trainer for its logs only after AcceptGradientClipping() returned true.
  virtual double last_gradient_norm() const { return 0.0; }

  // True if this rank only serves (e.g. a parameter-server rank) and should not train.
  virtual bool IsServerOnly() const { return false; }
  // True on every rank if any rank of the world is server-only (the same answer everywhere).
  virtual bool HasServerOnlyRanks() const { return false; }
  // True on every rank if the training ranks step on their own, with no per-step collective
  // among them (the same answer everywhere): they report to the lead instead (see the top). An
  // optimizer with server-only ranks does; one whose every rank trains and also serves may.
  virtual bool TrainsIndependently() const { return HasServerOnlyRanks(); }
  // Server-only ranks: after Setup(), answers the training ranks until all of them finished.
  virtual Status Serve() { return UnimplementedError("this optimizer has no serve loop"); }

  // The step the learning-rate schedule is evaluated at, given the trainer's local step: an
  // asynchronous optimizer returns the global progress instead (updates applied by all ranks).
  virtual int64_t ScheduleStep(int64_t local_step) const { return local_step; }
  // Brings arena.values() to the parameters a checkpoint or an evaluation should see (an
  // asynchronous worker pulls the newest ones). Training ranks call it together (or the lead).
  virtual Status Refresh() { return Status::Ok(); }
  // The state a checkpoint stores, called on the lead only. An optimizer whose state lives on
  // other ranks gathers it here; while others keep updating those ranks, it also brings
  // arena.values() to the parameters of that same instant (the checkpoint takes them from there
  // after this call), so that the parameters and the state are one snapshot.
  virtual Result<std::string> CollectState() { return SaveState(); }
  // Called on every rank before Setup() when the run has a checkpoint directory (see the top).
  virtual void OfferCheckpoints(const OptimizerCheckpoints& checkpoints) { (void)checkpoints; }

  // Before each Step(): the trainer's step once that step is done (resumes counted) and the
  // examples of its batch (0 for a step without data of its own). An optimizer that can answer
  // AppliedWorkOf() carries them with its updates; the default ignores them.
  virtual void NoteStep(int64_t step, int64_t examples) {
    (void)step;
    (void)examples;
  }
  // The lead, at the end of a run, for a training rank it lost (`rank` in the world): what of
  // that rank's work the ranks holding the parameters applied, once they too have dropped it;
  // nullopt if this optimizer cannot tell (the trainer then counts from the rank's last report).
  virtual Result<std::optional<AppliedWork>> AppliedWorkOf(int rank) {
    (void)rank;
    return std::optional<AppliedWork>();
  }
  // The lead of training ranks that step independently, for its logs and progress line (the
  // whole job's examples/s): the examples of the updates that the ranks holding the parameters
  // applied so far in this session, summed over every training rank (each update carries the
  // examples NoteStep() told its rank); nullopt if this optimizer cannot tell (the trainer then
  // adds up what the ranks reported).
  virtual Result<std::optional<int64_t>> ExamplesApplied() { return std::optional<int64_t>(); }
  // A training rank whose lead (`lost`, its rank in the world) was lost: the world rank of the
  // training rank that leads now, the same on every rank that asks (see the top); `lost` itself
  // if the parameter holders still see it alive by their deadline; nullopt if this optimizer
  // cannot tell (the lead is then not replaced).
  virtual Result<std::optional<int>> LeadAfter(int lost) {
    (void)lost;
    return std::optional<int>();
  }
};

}  // namespace reel

#endif  // REEL_OPTIMIZER_H_
