// Positions of the tfrecord data source: the text Position() returns and Restore() /
// RestoreResharded() take, and the replay that turns the positions of an earlier run's ranks into
// the set of records they had consumed.
//
// Format, version 2 (one line, fields separated by single spaces):
//   tfrecord/v2 fp=FFFFFFFFFFFFFFFF epoch=E records=N rank=R world=W consumed=SET
// fp     fingerprint of what fixes the epoch's record order: the file URIs, features, level,
//        max_frames, seed, shuffle_buffer and skip_corrupt; not the shard, so positions of runs
//        with different numbers of ranks compare;
// E      the epoch; N the records this rank had delivered in it (the rank's replayed stream
//        reproduces exactly which ones);
// R, W   the rank and the number of ranks that wrote it;
// SET    the records of epoch E that an earlier run had consumed before this run's ranks split
//        the rest among themselves (ConsumedSet text; "-" for a normal epoch).
// A checkpoint stores the positions of every rank (rank 0 gathers them), so the set of records
// the run had consumed is SET plus, for every rank R, the first N records of R's stream, whatever
// the number of ranks that resumes it.
// Version 1 ("tfrecord/v1 fp=F epoch=E records=N", fp including the shard) is still read, for a
// resume on the same number of ranks.
#ifndef REEL_PLUGINS_TFRECORD_SRC_SOURCE_POSITION_H_
#define REEL_PLUGINS_TFRECORD_SRC_SOURCE_POSITION_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "consumed_set.h"
#include "record_stream.h"

namespace reel::tfrecord {

struct SourcePosition {
  int version = 2;
  uint64_t fingerprint = 0;
  int64_t epoch = 0;
  int64_t records = 0;
  int rank = 0, world = 1;     // version 2 only
  std::string consumed = "-";  // version 2 only, ConsumedSet text

  std::string Format() const;
  // InvalidArgument quoting the text when it is not a tfrecord position.
  static Result<SourcePosition> Parse(std::string_view text);
};

// Fingerprints of a stream configuration: with the shard (version 1) and without (version 2).
uint64_t ShardFingerprint(const StreamConfig& config);
uint64_t OrderFingerprint(const StreamConfig& config);

// The records of one epoch that the ranks at `positions` (all of one run, index = rank) had
// consumed, found by replaying each rank's stream. Positions in different epochs (ranks that
// stepped independently) give the earliest, `*epoch`, in which a rank already past it had
// consumed all of its share. InvalidArgument for positions of another configuration, of
// different parts of that epoch or an incomplete set of ranks; DataLoss when a rank's stream has
// fewer records than its position counts (the files changed).
Result<ConsumedSet> ConsumedBy(const StreamConfig& config, std::span<const std::string> positions,
                               int64_t* epoch);

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_SRC_SOURCE_POSITION_H_
