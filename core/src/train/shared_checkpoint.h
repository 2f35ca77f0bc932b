// Resuming a run of several ranks from one checkpoint: rank 0 reads the newest checkpoint of its
// checkpoint directory and broadcasts it (parameters, optimizer state, step, epoch, data
// positions), so ranks on hosts with their own disks cannot start from different states.
//
// Every other rank lists its own view of the directory and must agree: the same newest
// checkpoint, or none at all (only rank 0 writes checkpoints, so a rank with a local disk has
// none). A rank that sees a different newest checkpoint, or one while rank 0 sees none, makes
// every rank fail with FailedPrecondition naming it and both checkpoints: silent divergence is
// never an option. A rank 0 that cannot read its checkpoint fails every rank the same way.
//
// Thread-safety: collective; every rank of `comm` calls it, one thread per rank.
#ifndef REEL_CORE_SRC_TRAIN_SHARED_CHECKPOINT_H_
#define REEL_CORE_SRC_TRAIN_SHARED_CHECKPOINT_H_

#include <chrono>
#include <string>

#include "reel/core/checkpoint.h"
#include "reel/transport.h"

namespace reel::core {

// The newest checkpoint as rank 0 read it, with its URI (rank 0's) in `uri`; NotFound on every
// rank when rank 0 has none. Each collective waits at most `timeout`.
Result<CheckpointState> LoadNewestFromRank0(CheckpointManager& checkpoints, Communicator& comm,
                                            std::chrono::milliseconds timeout, std::string* uri);

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_SHARED_CHECKPOINT_H_
