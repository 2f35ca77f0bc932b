// EpochStream: one epoch of one rank's decoded records, in their final (shuffled) order. The
// reading half of the tfrecord DataSource (batching and prefetching live in tfrecord_source.cc).
//
// The order depends only on the file list, shard, seed, epoch and shuffle_buffer, and records are
// skipped (skip_corrupt) deterministically, so replaying an epoch reproduces it exactly; Restore()
// relies on that.
//
// The epoch's global record order is its files in their (shuffled) epoch order, each file's
// records in file order. Ranks own whole files (files >= ranks) or every world_size-th record of
// the global order. An epoch resumed on another number of ranks (`consumed` given) leaves out the
// records in that set and deals the rest out record by record: the j-th record of the global
// order that is not in the set belongs to rank j % world_size, so ranks' shares differ by at
// most one record.
//
// Ownership: borrows its StreamConfig (and the Storage pointers in it), which must outlive it.
// Thread-safety: none; used by one thread at a time (the prefetch thread or the caller).
#ifndef REEL_PLUGINS_TFRECORD_SRC_RECORD_STREAM_H_
#define REEL_PLUGINS_TFRECORD_SRC_RECORD_STREAM_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "consumed_set.h"
#include "reel/data_source.h"
#include "reel/recordio.h"
#include "reel/storage.h"
#include "yt8m.h"

namespace reel::tfrecord {

struct SourceFile {
  Storage* storage = nullptr;  // not owned
  std::string uri;
  recordio::Compression compression = recordio::Compression::kNone;
};

struct StreamConfig {
  DecodeConfig decode;
  std::vector<SourceFile> files;  // sorted by URI
  ShardSpec shard;
  uint64_t seed = 0;
  int64_t shuffle_buffer = 0;  // 0: file order
  bool skip_corrupt = false;
  std::string log_prefix = "tfrecord";  // for lines on stderr
};

// A decoded record; `rec` views into `payload`, so the object is kept behind a unique_ptr
// (never moved) while the views are used.
//
// Its data CRC is not checked yet (it decoded, but its bytes may still be wrong): whoever uses the
// payload first computes Crc32c(payload), usually fused with dequantization, and passes it to
// EpochStream::CheckCrc before anything built from it is delivered.
struct PendingRecord {
  std::string payload;
  VideoRecord rec;
  int64_t framed_bytes = 0;
  uint32_t stored_crc = 0;    // the data CRC the file carries (unmasked)
  uint32_t computed_crc = 0;  // Crc32c(payload), once someone has computed it
  size_t file = 0;            // index into StreamConfig::files
  uint64_t index = 0;         // the record's index in its file
  uint64_t offset = 0;        // stream offset of the record, for errors
};

class EpochStream {
 public:
  // `consumed`, if not null, must outlive the stream.
  EpochStream(const StreamConfig* config, int64_t epoch, const ConsumedSet* consumed = nullptr);

  // The next record of the epoch; OutOfRange at its end. Errors name the file and offset.
  Status Next(std::unique_ptr<PendingRecord>* out);
  // Returns a record's memory for reuse.
  void Recycle(std::unique_ptr<PendingRecord> p);

  // OK if `computed` (Crc32c of p's payload) matches the CRC in the file; else the reader's
  // DataLoss naming the file, offset and both CRCs.
  Status CheckCrc(const PendingRecord& p, uint32_t computed) const;
  // For a record found corrupt after Next() returned it: with skip_corrupt, counts and logs it
  // and returns OK (the caller drops the record); otherwise returns `why`.
  Status SkipCorrupt(const Status& why) { return Skip(why, true); }

  int64_t skipped() const { return skipped_; }
  const std::string& first_skip() const { return first_skip_; }

 private:
  Status ReadOwned(std::unique_ptr<PendingRecord>* out);
  Status OpenFile(size_t i);
  Status Skip(const Status& why, bool owned);

  const StreamConfig* config_;
  std::vector<size_t> order_;  // indexes into config_->files, this epoch's reading order
  bool by_file_ = true;
  size_t next_file_ = 0;  // position in order_
  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<recordio::RecordReader> reader_;
  const ConsumedSet* consumed_ = nullptr;
  uint64_t record_index_ = 0;  // index over the epoch's records not in consumed_ (by record)
  uint64_t file_record_ = 0;   // index of the next record in the open file
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<PendingRecord>> buffer_;  // the shuffle buffer
  std::vector<std::unique_ptr<PendingRecord>> free_;
  bool input_done_ = false;
  int64_t skipped_ = 0;
  std::string first_skip_;
};

// Deterministic 64-bit mixing (splitmix64), for seeds combined with epochs and ranks.
uint64_t MixSeed(uint64_t a, uint64_t b);

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_SRC_RECORD_STREAM_H_
