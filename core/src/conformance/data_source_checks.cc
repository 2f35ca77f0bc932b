// Data source conformance (reel/data_source.h): an epoch ends with OutOfRange and stays ended,
// batches are valid, the same seed gives the same order, epochs cover the same videos, Restore
// resumes exactly where Position was taken (and refuses a foreign position), and two shards read
// every video exactly once between them. Videos are told apart by their ids.
#include <algorithm>
#include <set>

#include "checks.h"

namespace reel::core::conformance_internal {
namespace {

using Ids = std::vector<std::string>;

struct Reader {
  const Registry& registry;
  const ComponentEntry& entry;
  const ConformanceOptions& options;
  StorageResolver& storage;

  Result<Owned<DataSource>> Make(int rank = 0, int world = 1) const {
    DataSourceContext ctx{{rank, world}, 11, &storage};
    return registry.CreateDataSource(entry.info.name, options.options, ctx);
  }
};

// The ids of the next `batches` batches (all that are left when negative), checking each batch.
Result<Ids> Read(DataSource& source, int batches = -1) {
  Ids ids;
  for (int i = 0; batches < 0 || i < batches; ++i) {
    Result<Batch> b = source.Next();
    if (b.status().code() == StatusCode::kOutOfRange) break;
    REEL_RETURN_IF_ERROR(b.status().WithContext("batch " + std::to_string(i)));
    if (b->size() == 0) return InvalidArgumentError("batch " + std::to_string(i) + " is empty");
    REEL_RETURN_IF_ERROR(ValidateBatch(*b, 1 << 30).WithContext("batch " + std::to_string(i)));
    ids.insert(ids.end(), b->ids.begin(), b->ids.end());
  }
  return ids;
}

Ids Sorted(Ids ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status EpochEnds(const Reader& r, Ids& epoch0) {
  REEL_ASSIGN_OR_RETURN(auto source, r.Make());
  REEL_ASSIGN_OR_RETURN(epoch0, Read(*source));
  if (epoch0.empty()) return FailedPreconditionError("the first epoch has no videos");
  if (std::set<std::string>(epoch0.begin(), epoch0.end()).size() != epoch0.size())
    return InvalidArgumentError("a video id appears twice in one epoch");
  for (int i = 0; i < 2; ++i)
    REEL_RETURN_IF_ERROR(ExpectCode(source->Next().status(), StatusCode::kOutOfRange,
                                    "Next() after the epoch's end"));
  return Status::Ok();
}

Status SameSeedSameOrder(const Reader& r, const Ids& epoch0) {
  REEL_ASSIGN_OR_RETURN(auto source, r.Make());
  REEL_ASSIGN_OR_RETURN(Ids again, Read(*source));
  return again == epoch0 ? Status::Ok()
                         : InvalidArgumentError(
                               "a second source with the same seed yields "
                               "another order or other videos");
}

Status NextEpochSameVideos(const Reader& r, const Ids& epoch0) {
  REEL_ASSIGN_OR_RETURN(auto source, r.Make());
  REEL_RETURN_IF_ERROR(source->StartEpoch(1));
  REEL_ASSIGN_OR_RETURN(Ids epoch1, Read(*source));
  return Sorted(epoch1) == Sorted(epoch0)
             ? Status::Ok()
             : InvalidArgumentError("epoch 1 has " + std::to_string(epoch1.size()) +
                                    " videos, epoch 0 " + std::to_string(epoch0.size()) +
                                    ", or other ones");
}

Status RestoreResumes(const Reader& r, const Ids& epoch0) {
  REEL_ASSIGN_OR_RETURN(auto first, r.Make());
  REEL_ASSIGN_OR_RETURN(Ids head, Read(*first, 1));
  REEL_ASSIGN_OR_RETURN(std::string position, first->Position());
  REEL_ASSIGN_OR_RETURN(auto second, r.Make());
  REEL_RETURN_IF_ERROR(second->Restore(position).WithContext("Restore"));
  REEL_ASSIGN_OR_RETURN(Ids tail, Read(*second));
  head.insert(head.end(), tail.begin(), tail.end());
  if (head != epoch0)
    return InvalidArgumentError("one batch, then Position and Restore in a new source: " +
                                std::to_string(head.size()) + " videos in another order than the " +
                                std::to_string(epoch0.size()) + " of an uninterrupted epoch");
  return ExpectCode(second->Restore("not a position"), StatusCode::kInvalidArgument,
                    "Restore(\"not a position\")");
}

Status ShardsSplitTheVideos(const Reader& r, const Ids& epoch0) {
  Ids both;
  for (int rank = 0; rank < 2; ++rank) {
    REEL_ASSIGN_OR_RETURN(auto source, r.Make(rank, 2));
    REEL_ASSIGN_OR_RETURN(Ids mine, Read(*source));
    both.insert(both.end(), mine.begin(), mine.end());
  }
  return Sorted(both) == Sorted(epoch0)
             ? Status::Ok()
             : InvalidArgumentError("ranks 0 and 1 of 2 read " + std::to_string(both.size()) +
                                    " videos between them (or other ones); one rank reads " +
                                    std::to_string(epoch0.size()));
}

}  // namespace

void CheckDataSource(const Registry& registry, const ComponentEntry& entry,
                     const ConformanceOptions& options, StorageResolver& storage,
                     const CheckSink& sink) {
  Reader r{registry, entry, options, storage};
  Result<Owned<DataSource>> made = r.Make();
  if (!made.ok()) {
    std::string required;
    for (const OptionSpec& o : entry.info.options)
      if (o.required && !options.options.count(o.name))
        required += " --option " + entry.info.name + "." + o.name + "=...";
    if (!required.empty()) return Skip(sink, "data source checks", "it needs options:" + required);
    return (void)Report(sink, "creates from its options", made.status());
  }
  Ids epoch0;
  if (!Report(sink, "an epoch of valid batches ends with OutOfRange, and stays ended",
              EpochEnds(r, epoch0)))
    return;
  Report(sink, "the same seed gives the same order", SameSeedSameOrder(r, epoch0));
  Report(sink, "epoch 1 has the videos of epoch 0", NextEpochSameVideos(r, epoch0));
  Report(sink, "Restore(Position()) resumes exactly; a foreign position is InvalidArgument",
         RestoreResumes(r, epoch0));
  Report(sink, "two shards read every video once between them", ShardsSplitTheVideos(r, epoch0));
}

}  // namespace reel::core::conformance_internal
