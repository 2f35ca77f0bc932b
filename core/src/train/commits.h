// In-memory commits (trainer.commit_every_steps; docs/distributed.md, "In-memory commits"): every
// K steps each rank keeps the run's state, encoded as a checkpoint object (EncodeCheckpoint), in
// a file of a memory file system (trainer.commit_dir, /dev/shm by default), so a restart after a
// lost rank loses at most K steps and reads no storage. The on-disk checkpoint stays the durable
// state; a resume takes whichever of the two is newer.
//
// A commit is named by the job (the launch's identity without its attempt, so every attempt of a
// launch finds the commits of the ones before), by the checkpoint directory it belongs with and
// by the rank that wrote it: "reel-commit.JOB.HASH.rankR". Files of another job or checkpoint
// directory are never read.
//
// Thread-safety: a CommitStore is used by the thread of one rank; ranks of one process (threads)
// each have their own and write only their own file.
#ifndef REEL_CORE_SRC_TRAIN_COMMITS_H_
#define REEL_CORE_SRC_TRAIN_COMMITS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reel/status.h"

namespace reel::core {

// "reel-commit.JOB.HASH.": the names of one job's commits begin so. `job_id` is the launch's
// identity (an attempt's ".restart-K" is dropped; "" is written as "nojob"), HASH a hash of
// `checkpoint_dir`. Characters outside [A-Za-z0-9._-] in the job become '_'.
std::string CommitPrefix(std::string_view job_id, std::string_view checkpoint_dir);

class CommitStore {
 public:
  CommitStore(std::string dir, std::string prefix, int rank)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), rank_(rank) {}

  // Replaces this rank's commit with `bytes` (a temporary file renamed over it, so a rank killed
  // while writing leaves the previous commit whole).
  Status Write(std::string_view bytes) const;

  // The newest readable commit of this job in the directory (any rank's: ranks of one host see
  // each other's), decoded to check it; step -1 when there is none. A commit that does not decode
  // (DataLoss: a checksum mismatch, a truncated file) is skipped and named in `refused`.
  struct Newest {
    int64_t step = -1;
    std::string path;
    std::string bytes;
    std::vector<std::string> refused;  // "PATH: STATUS", one per unreadable commit
  };
  Newest FindNewest() const;

  // Removes every commit of this job in the directory (temporary files too).
  void RemoveAll() const;

  std::string MyPath() const { return dir_ + "/" + prefix_ + "rank" + std::to_string(rank_); }

 private:
  // The paths of this job's commits (not temporary files), in name order.
  std::vector<std::string> List(bool with_temporary) const;

  std::string dir_, prefix_;
  int rank_;
};

// What a resume starts from: the on-disk checkpoint, a commit held by rank `holder`, or nothing.
struct ResumeChoice {
  enum class Source { kNone, kDisk, kCommit };
  Source source = Source::kNone;
  int holder = -1;  // kCommit: the lowest rank holding the newest commit
  int64_t step = -1;
};

// The newest state, given the newest on-disk checkpoint's step (-1: none) and each rank's newest
// commit's step (-1: none). A commit is taken only when it is newer than the disk: on a tie the
// durable checkpoint wins.
ResumeChoice ChooseNewest(int64_t disk_step, std::span<const int64_t> commit_steps);

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_COMMITS_H_
