// ConsumedSet: which records of an epoch some earlier set of ranks had consumed, as half-open
// ranges of record indexes per file. It is what makes a data position independent of the number
// of ranks: a run resumed on another number of ranks reads the epoch's records not in the set.
//
// Text form (inside a position, so without spaces): per file with consumed records, in file
// order, "FILE:BEGIN-END,BEGIN-END" (FILE the index into the sorted file list, ranges ascending
// and disjoint), files joined by "/"; the empty set is "-". A shuffle buffer leaves at most its
// size of holes per rank, so the text stays short.
//
// Thread-safety: a const ConsumedSet may be read from several threads.
#ifndef REEL_PLUGINS_TFRECORD_SRC_CONSUMED_SET_H_
#define REEL_PLUGINS_TFRECORD_SRC_CONSUMED_SET_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "reel/status.h"

namespace reel::tfrecord {

class ConsumedSet {
 public:
  void Insert(size_t file, uint64_t record);
  bool Contains(size_t file, uint64_t record) const;
  int64_t size() const;  // number of records in the set
  bool empty() const { return files_.empty(); }

  std::string Encode() const;
  // InvalidArgument naming the text when it is not Encode()'s form or names a file index at or
  // beyond `files`.
  static Result<ConsumedSet> Decode(std::string_view text, size_t files);

  bool operator==(const ConsumedSet& other) const = default;

 private:
  // Per file: range begin -> end (exclusive), disjoint and not touching.
  std::map<size_t, std::map<uint64_t, uint64_t>> files_;
};

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_SRC_CONSUMED_SET_H_
