// The `tfrecord` DataSource: YouTube-8M TFRecord files from any Storage into padded Batches.
//
// Pipeline per epoch: files (globbed once, sorted; permuted per epoch when shuffling) -> this
// rank's records (by file when there are at least as many files as ranks, else by record index)
// -> RecordReader (length CRC checked) -> DecodeVideo -> seeded shuffle buffer -> batches of
// `batch_size`, each feature dequantized into [B, T, D] (T the longest video in the batch, or
// max_frames with fixed_length) in recycled storage, with each payload's data CRC computed in the
// same pass; a record whose CRC fails never reaches a batch. A prefetch thread runs the pipeline
// ahead of Next() when prefetch > 0.
//
// Position() is "epoch + records delivered" (+ shard and what an earlier run had consumed, see
// source_position.h); Restore() replays the epoch's deterministic record order and drops the
// records already delivered (reading and decoding, but not dequantizing, them).
// RestoreResharded() replays every old rank's share the same way to find the records they had
// consumed, and deals the rest of the epoch out among the new ranks (record_stream.h).
//
// Thread-safety: as DataSource (one driving thread); the prefetch thread is internal.
#ifndef REEL_PLUGINS_TFRECORD_SRC_TFRECORD_SOURCE_H_
#define REEL_PLUGINS_TFRECORD_SRC_TFRECORD_SOURCE_H_

#include <memory>

#include "reel/data_source.h"
#include "reel/options.h"

namespace reel::tfrecord {

// The option schema (see `reel plugins show tfrecord`).
OptionSchema TfRecordSourceSchema();

// NotFound "no file matches 'PATTERN'"; for a relative local pattern it says what the pattern was
// relative to (the working directory), the usual cause when a config is run from elsewhere.
Status NoFileMatches(const std::string& pattern);

// Resolves and globs the files now, so a missing input fails here: NotFound naming the pattern.
Result<std::unique_ptr<DataSource>> CreateTfRecordSource(const Options& options,
                                                         const DataSourceContext& context);

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_SRC_TFRECORD_SOURCE_H_
