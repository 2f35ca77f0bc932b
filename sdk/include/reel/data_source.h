// DataSource: turns stored records into training Batches for one rank.
//
// Built by a factory from its options (file patterns, feature names and sizes, max frames,
// classes, batch size, shuffle buffer, ...) and a DataSourceContext (this rank's shard, the seed,
// and the host's storage). Next() yields batches of the current epoch and then OutOfRange;
// StartEpoch(e) begins epoch e (reshuffled from the seed and e, so a run is reproducible). Any
// other error is real: DataLoss for corruption (naming file and byte offset), NotFound for
// missing inputs. Position() captures where the stream is, so a resumed run yields exactly the
// records that were left, on the same number of ranks (Restore) or another (RestoreResharded).
//
// Thread-safety: one thread drives a DataSource; implementations may prefetch internally.
#ifndef REEL_DATA_SOURCE_H_
#define REEL_DATA_SOURCE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "reel/batch.h"
#include "reel/status.h"
#include "reel/storage.h"

namespace reel {

// Which share of the input this reader reads; the source divides its input among the ranks.
struct ShardSpec {
  int rank = 0;        // this process's index among the readers
  int world_size = 1;  // number of readers; every record is read by exactly one of them per epoch
};

// What the factory learns from the host: its shard, a seed and the storage to read through.
struct DataSourceContext {
  ShardSpec shard;
  uint64_t seed = 0;                   // for shuffling; combined with the epoch
  StorageResolver* storage = nullptr;  // not owned; outlives the data source
};

// Counters a source reports, e.g. at the end of an epoch.
struct DataStats {
  int64_t records = 0;          // records read so far in this epoch
  int64_t skipped_corrupt = 0;  // records skipped because of corruption (skip_corrupt: true)
  int64_t bytes = 0;            // input bytes consumed in this epoch
};

// Yields batches epoch after epoch and can say (Position) and resume (Restore) where it is.
class DataSource {
 public:
  virtual ~DataSource() = default;

  // The next batch of the current epoch; OutOfRange when the epoch is done. The last batch of an
  // epoch may be smaller than the batch size.
  virtual Result<Batch> Next() = 0;

  // Begins epoch `epoch` (0-based). The source starts in epoch 0 without this call.
  virtual Status StartEpoch(int64_t epoch) = 0;

  // An opaque, self-describing snapshot of the position (epoch and records consumed), valid for
  // the same options and shard; and the inverse. Restore() of a foreign position is
  // InvalidArgument.
  virtual Result<std::string> Position() const = 0;
  virtual Status Restore(std::string_view position) = 0;

  // Resumes on a different number of readers: `positions` are the Position()s of every reader of
  // an earlier run (index = its rank), whose world size may differ from this source's. Every
  // reader of the new run passes the same list; together they then read each record of that
  // epoch that none of the earlier readers had consumed exactly once (this source yields its
  // share), and later epochs are sharded as usual. Readers that stepped independently (async
  // training) may have been in different epochs: then the earliest of them resumes, a reader
  // already past it counts as having consumed all of its share of it, and what such a reader had
  // read of later epochs is read again. InvalidArgument for positions of other files or options;
  // Unimplemented where a source cannot do it (then a run may only resume on the number of
  // readers that saved it).
  virtual Status RestoreResharded(std::span<const std::string> positions) {
    (void)positions;
    return UnimplementedError("this data source cannot resume on a different number of ranks");
  }

  virtual DataStats stats() const { return {}; }
};

}  // namespace reel

#endif  // REEL_DATA_SOURCE_H_
