// Optimizer: turns this rank's gradients into new parameters, communicating as its algorithm
// needs: "sync" averages gradients over all ranks with allreduce before an update rule;
// "async_sgd" pushes to parameter servers and pulls weights back; others may do anything else.
//
// Life: the factory learns its rank in the world (OptimizerContext), so it can refuse a world it
// cannot run on before any data is opened. The trainer offers gradient clipping
// (AcceptGradientClipping), then Setup() binds the arena and the world's communicator (both
// outlive the optimizer); every step the trainer calls Step(lr) after the model's Backward()
// filled arena.grads(); EndEpoch() when this rank's data of an epoch ran out; Finish() at the end
// (flushes pending work, stops servers).
//
// A synchronous optimizer implements Setup, Step, SaveState and RestoreState, and may override
// the four with defaults. Every rank trains and ranks step together, so the trainer keeps them in
// step: they all enter Step(), EndEpoch() and Finish() together.
//
// Roles: an optimizer that gives ranks roles (server-only ranks, training ranks that step
// independently) returns its RankRoles (reel/rank_roles.h) from rank_roles(), the same on every
// rank; the trainer then asks that interface for the roles and everything that comes with them.
//
// Checkpoints: SaveState() is called on the lead alone (rank 0 of the training ranks), then the
// checkpoint takes the parameters from arena.values(). An optimizer whose state lives on other
// ranks gathers it there, and leaves arena.values() at the parameters of that same instant; one
// whose ranks step together may instead gather it in GatherState(), which the trainer calls on
// every rank, in step, before each checkpoint (the lead's SaveState() follows). On a
// resume every rank gets RestoreState() with that whole state, before or after Setup(), and
// keeps its own part.
//
// Gradients during Backward(): an optimizer that can use gradient ranges before Step() (e.g.
// "sync" starts reducing them, docs/distributed.md) returns a GradientSink from
// gradient_sink(); the trainer gives it to the model (Model::SetGradientSink) for the steps
// where nothing else writes arena.grads() between Backward() and Step(). Step() then waits for
// what the sink started. A rank that will not call Step() after such a Backward() (an error, a
// stop) calls no other collective until the optimizer is destroyed, which ends what is in flight.
//
// Thread-safety: one thread per instance.
#ifndef REEL_OPTIMIZER_H_
#define REEL_OPTIMIZER_H_

#include <string>
#include <string_view>

#include "reel/model.h"
#include "reel/param_arena.h"
#include "reel/rank_roles.h"
#include "reel/status.h"
#include "reel/transport.h"

namespace reel {

// What the factory learns about the rank the optimizer will run on.
struct OptimizerContext {
  int rank = 0;
  int world_size = 1;
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
  // Opaque, versioned by the implementation; see Checkpoints at the top.
  virtual Result<std::string> SaveState() = 0;
  virtual Status RestoreState(std::string_view state) = 0;
  // Every rank, in step, before the lead's SaveState(); see Checkpoints at the top. "sync" with
  // zero_stage 1 gathers the shards of its state to the lead here.
  virtual Status GatherState() { return Status::Ok(); }

  virtual Status Finish() { return Status::Ok(); }
  // Epoch `epoch` ended for this rank: ranks that step together end it together, independent
  // training ranks (RankRoles) each when its own share ran out.
  virtual Status EndEpoch(int64_t /*epoch*/) { return Status::Ok(); }

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

  // Receives the model's finished gradient ranges during Backward() (see the top); null (the
  // default): the optimizer reads arena.grads() in Step() only. Valid until destruction.
  virtual GradientSink* gradient_sink() { return nullptr; }

  // The roles this optimizer gives ranks (see the top); null: every rank trains, in step.
  virtual RankRoles* rank_roles() { return nullptr; }
};

}  // namespace reel

#endif  // REEL_OPTIMIZER_H_
