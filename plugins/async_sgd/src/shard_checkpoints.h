// Checkpoints the parameter servers write of their own shards (option server_checkpoint_every),
// so that a resume does not depend on the lead worker having collected every shard recently.
//
// A server writes "async-shard-v<version>-<shard>-of-<shards>.rasg" into the run's checkpoint
// directory each time its shard's version (updates applied) reaches a multiple of the cadence.
// Every push goes to every shard, so every shard passes every multiple: the files of one version
// form a set, complete when each of the run's shards has its file of that version. A resume
// takes the newest complete set if it is newer than the trainer's checkpoint, whichever number of
// servers wrote it (versions count updates from the run's start, so they compare across
// layouts; another layout's set is cut anew); an incomplete one (a server died before it wrote
// its file) is skipped. Each server keeps its newest max(keep, 2) files and deletes older ones,
// so a complete set survives while the next one is written, and at the start of serving the
// files newer than its shard are deleted, of every layout (left by a history the run abandoned:
// a later resume must not take them for this run's).
//
// File: "RASS" | uint32 format (1) | uint32 shard | uint32 shards | int64 version | uint64 floats
// | the floats | the shard's state (ShardServer::Cut: int64 version, the rule's state).
//
// Thread-safety: a ShardCheckpoints may be used from several threads at once.
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_CHECKPOINTS_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_CHECKPOINTS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "reel/status.h"
#include "reel/storage.h"

namespace reel::async_sgd {

// Moves the first n bytes of `in` to dst and drops them from `in`; false (nothing taken) if `in`
// is shorter. This plugin's decoders (shard files, the lead's collected state) read with it.
inline bool TakeBytes(std::string_view& in, void* dst, size_t n) {
  if (in.size() < n) return false;
  if (n > 0) std::memcpy(dst, in.data(), n);
  in.remove_prefix(n);
  return true;
}

struct ShardSnapshot {
  int shard = 0;
  int shards = 1;
  int64_t version = 0;
  std::vector<float> values;
  std::string state;  // ShardServer::Cut()
};

// "async-shard-v000000000120-1-of-2.rasg".
std::string ShardFileName(int64_t version, int shard, int shards);
std::string EncodeShard(const ShardSnapshot& s);
// DataLoss naming `where` for a malformed or truncated file.
Result<ShardSnapshot> DecodeShard(std::string_view bytes, std::string_view where);

// A complete set: every one of `shards` shards has its file of `version`.
struct ShardSet {
  int64_t version = -1;  // -1: none
  int shards = 0;
  bool operator==(const ShardSet&) const = default;
};

class ShardCheckpoints {
 public:
  ShardCheckpoints(StorageResolver& storage, std::string dir, int keep)
      : storage_(storage), dir_(std::move(dir)), keep_(keep <= 0 ? 0 : std::max(keep, 2)) {}

  // Writes the snapshot's file, then deletes this shard's files beyond the newest `keep` and,
  // for shard 0, every other layout's files older than this layout's newest complete set.
  Status Write(const ShardSnapshot& s);
  // The complete sets of every layout (number of shards) in the directory, oldest first (by
  // version, then number of shards).
  Result<std::vector<ShardSet>> CompleteSets();
  // The file of `shard` at `version`, checked to be that shard of that many shards.
  Result<ShardSnapshot> Read(int64_t version, int shard, int shards);
  // Deletes `shard`'s files of versions above `version` and, for shard 0, those of every other
  // layout: a history the run abandoned, whichever number of servers wrote it.
  Status DeleteNewerThan(int64_t version, int shard, int shards);

  std::string Uri(const std::string& name) const;
  const std::string& dir() const { return dir_; }

 private:
  struct ShardFile {
    int64_t version = 0;
    int shard = 0;
    int shards = 0;
  };
  // The shard files of `shards` shards (of any number if shards < 0), oldest first.
  Result<std::vector<ShardFile>> Files(int shards);
  // The complete sets among `files`, oldest first.
  static std::vector<ShardSet> CompleteSetsOf(const std::vector<ShardFile>& files);
  // Deletes the file; one already gone is no error (another of the server's threads, or
  // another server, pruned it).
  Status Delete(Storage& storage, const ShardFile& f);

  StorageResolver& storage_;
  const std::string dir_;
  const int keep_;  // 0: all
};

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_CHECKPOINTS_H_
