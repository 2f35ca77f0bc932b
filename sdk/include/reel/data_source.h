// DataSource: turns stored records into training Batches for one rank.
//
// Built by a factory from its options (file patterns, feature names and sizes, max frames,
// classes, batch size, shuffle buffer, ...) and a DataSourceContext (this rank's shard, the seed,
// and the host's storage). Next() yields batches of the current epoch and then OutOfRange;
// StartEpoch(e) begins epoch e (reshuffled from the seed and e, so a run is reproducible). Any
// other error is real: DataLoss for corruption (naming file and byte offset), NotFound for
// missing inputs. Position() captures where the stream is, so a resumed run yields exactly the
// records that were left.
//
// Thread-safety: one thread drives a DataSource; implementations may prefetch internally.
#ifndef REEL_DATA_SOURCE_H_
#define REEL_DATA_SOURCE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "reel/batch.h"
#include "reel/status.h"
#include "reel/storage.h"

namespace reel {

struct ShardSpec {
  int rank = 0;        // this process's index among the readers
  int world_size = 1;  // number of readers; every record is read by exactly one of them per epoch
};

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

class DataSource {
 public:
  virtual ~DataSource() = default;

  // The next batch of the current epoch; OutOfRange when the epoch is done. The last batch of an
  // epoch may be smaller than the batch size.
  virtual Result<Batch> Next() = 0;

  // Begins epoch `epoch` (0-based). The source starts in epoch 0 without this call.
  virtual Status StartEpoch(int64_t epoch) = 0;

  // An opaque, self-describing snapshot of the position (epoch and records consumed), valid for
  // the same options and shard; and the inverse. Restore() of a foreign position is InvalidArgument.
  virtual Result<std::string> Position() const = 0;
  virtual Status Restore(std::string_view position) = 0;

  virtual DataStats stats() const { return {}; }
};

}  // namespace reel

#endif  // REEL_DATA_SOURCE_H_
