// Checkpoints: the state of a training run (parameters, optimizer state, step, schedule and data
// positions, the config), saved to and restored from any Storage. The format is documented in
// proto/checkpoint.proto; every checkpoint carries a CRC32C of its payload.
//
// Safety: saving goes through Storage::OpenWrite, so a crash never leaves half a checkpoint under
// a final name; a checkpoint is fully decoded and checked (checksum, model name, parameter
// layout) before a single parameter is written, so a bad one changes nothing.
//
// Thread-safety: a CheckpointManager is used by one thread (rank 0 of a run).
#ifndef REEL_CORE_CHECKPOINT_H_
#define REEL_CORE_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reel/param_arena.h"
#include "reel/status.h"
#include "reel/storage.h"

namespace reel::core {

// Everything a checkpoint holds, decoded: what EncodeCheckpoint writes and DecodeCheckpoint
// returns.
struct CheckpointState {
  struct Block {
    std::string name;
    Shape shape;
    std::vector<float> values;
  };
  std::string model_name;
  std::vector<Block> params;
  std::string optimizer_state;
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t schedule_step = 0;
  std::vector<std::string> data_positions;  // per rank
  std::vector<int64_t> data_epochs;         // per rank: the epoch its position is in (or empty)
  std::vector<int64_t> data_steps;          // per rank: its steps taken at that position (or empty)
  std::string config_text;
  uint64_t seed = 0;
  int64_t examples_seen = 0;
  int world_size = 1;
  double wall_time = 0.0;
  double train_seconds = 0.0;
  int start_world_size = 0;  // the run's first session's ranks (0: unknown, take world_size)

  // Copies every block of `arena` into params.
  void CaptureParams(const ParamArena& arena);
};

// Copies the checkpoint's parameters into `arena` after checking that it holds `model_name` and
// exactly the arena's blocks (names and shapes, in order). FailedPrecondition naming the first
// difference otherwise, with the arena untouched. `where` names the checkpoint in errors.
Status RestoreParams(const CheckpointState& state, std::string_view model_name, ParamArena& arena,
                     std::string_view where);

// The bytes of a checkpoint object, and back. Decode: DataLoss (naming `where`) for a checksum
// mismatch, a truncated object or an unparsable payload.
std::string EncodeCheckpoint(const CheckpointState& state);
Result<CheckpointState> DecodeCheckpoint(std::string_view bytes, std::string_view where);

// "ckpt-0000000100.reelckpt".
std::string CheckpointName(int64_t step);

// Saves and finds a run's checkpoints in one directory (any Storage), keeping the newest `keep`.
class CheckpointManager {
 public:
  // `dir` is a URI or path; checkpoints beyond the newest `keep` are deleted (keep <= 0: all).
  CheckpointManager(StorageResolver& storage, std::string dir, int keep);

  // Writes a checkpoint for state.step and prunes old ones. Returns its URI.
  Result<std::string> Save(const CheckpointState& state);

  // Checkpoints in the directory as (step, URI), oldest first.
  Result<std::vector<std::pair<int64_t, std::string>>> List();
  // The newest checkpoint; NotFound naming the directory if there is none.
  Result<CheckpointState> LoadNewest(std::string* uri = nullptr);
  // The newest checkpoint's bytes as stored (DecodeCheckpoint reads them); NotFound as above.
  Result<std::string> ReadNewest(std::string* uri = nullptr);

  const std::string& dir() const { return dir_; }

 private:
  StorageResolver& storage_;
  std::string dir_;
  int keep_;
};

// Loads a checkpoint given either a checkpoint object or a directory of them (the newest).
Result<CheckpointState> LoadCheckpoint(StorageResolver& storage, std::string_view path,
                                       std::string* uri = nullptr);

}  // namespace reel::core

#endif  // REEL_CORE_CHECKPOINT_H_
