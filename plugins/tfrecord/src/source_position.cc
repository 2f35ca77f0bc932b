// Positions of the tfrecord data source (see source_position.h).
#include "source_position.h"

#include <algorithm>
#include <cstdio>

namespace reel::tfrecord {
namespace {

uint64_t Fnv1a(uint64_t h, std::string_view s) {
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull;  // field separator
}

// The fingerprint of version 1 mixed the shard between max_frames and the seed; version 2 leaves
// it out. Both are kept byte for byte so old positions still match.
uint64_t Fingerprint(const StreamConfig& c, bool with_shard) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& f : c.files) h = Fnv1a(h, f.uri);
  for (const auto& f : c.decode.features) h = Fnv1a(h, f.name + ":" + std::to_string(f.dim));
  std::vector<int64_t> values = {int64_t{c.decode.level == Level::kFrame}, c.decode.max_frames};
  if (with_shard) values.insert(values.end(), {c.shard.rank, c.shard.world_size});
  values.insert(values.end(),
                {static_cast<int64_t>(c.seed), c.shuffle_buffer, int64_t{c.skip_corrupt}});
  for (int64_t v : values) h = Fnv1a(h, std::to_string(v));
  return h;
}

// Adds to `out` the first `records` records of epoch `epoch` that rank `p.rank` of `p.world`
// delivered; all of its share of that epoch when `records` is kWholeShare.
constexpr int64_t kWholeShare = -1;
Status AddDelivered(const StreamConfig& config, const SourcePosition& p, int64_t epoch,
                    int64_t records, const ConsumedSet* base, ConsumedSet& out) {
  StreamConfig shard = config;
  shard.shard = {p.rank, p.world};
  EpochStream stream(&shard, epoch, base);
  for (int64_t left = records; left != 0;) {
    std::unique_ptr<PendingRecord> r;
    Status s = stream.Next(&r);
    if (s.code() == StatusCode::kOutOfRange && records == kWholeShare) break;
    if (s.code() == StatusCode::kOutOfRange)
      return DataLossError("rank " + std::to_string(p.rank) + " of " + std::to_string(p.world) +
                           " had delivered " + std::to_string(records) + " records of epoch " +
                           std::to_string(epoch) + " but its share has " +
                           std::to_string(records - left) + " now (did the files change?)");
    REEL_RETURN_IF_ERROR(s);
    // Delivered counts only records whose data CRC held, as the source's batches do.
    Status crc = stream.CheckCrc(*r, recordio::Crc32c(r->payload));
    if (crc.ok()) {
      if (records != kWholeShare) --left;
    } else {
      REEL_RETURN_IF_ERROR(stream.SkipCorrupt(crc));
    }
    out.Insert(r->file, r->index);
    stream.Recycle(std::move(r));
  }
  return Status::Ok();
}

}  // namespace

std::string SourcePosition::Format() const {
  char head[160];
  std::snprintf(head, sizeof head,
                "tfrecord/v2 fp=%016llx epoch=%lld records=%lld rank=%d world=%d",
                static_cast<unsigned long long>(fingerprint), static_cast<long long>(epoch),
                static_cast<long long>(records), rank, world);
  return std::string(head) + " consumed=" + consumed;
}

Result<SourcePosition> SourcePosition::Parse(std::string_view text) {
  const std::string t(text);
  auto bad = [&] { return InvalidArgumentError("'" + t + "' is not a tfrecord position"); };
  SourcePosition p;
  unsigned long long fp = 0;
  long long epoch = -1, records = -1;
  int end = 0;
  if (t.rfind("tfrecord/v1 ", 0) == 0) {
    if (std::sscanf(t.c_str(), "tfrecord/v1 fp=%llx epoch=%lld records=%lld%n", &fp, &epoch,
                    &records, &end) != 3 ||
        static_cast<size_t>(end) != t.size())
      return bad();
    p.version = 1;
  } else {
    if (std::sscanf(t.c_str(), "tfrecord/v2 fp=%llx epoch=%lld records=%lld rank=%d world=%d%n",
                    &fp, &epoch, &records, &p.rank, &p.world, &end) != 5)
      return bad();
    const std::string_view rest = text.substr(static_cast<size_t>(end));
    constexpr std::string_view kConsumed = " consumed=";
    if (rest.substr(0, kConsumed.size()) != kConsumed || rest.size() == kConsumed.size() ||
        rest.find(' ', kConsumed.size()) != std::string_view::npos || p.world < 1 || p.rank < 0 ||
        p.rank >= p.world)
      return bad();
    p.consumed = std::string(rest.substr(kConsumed.size()));
  }
  if (epoch < 0 || records < 0) return bad();
  p.fingerprint = fp;
  p.epoch = epoch;
  p.records = records;
  return p;
}

uint64_t ShardFingerprint(const StreamConfig& config) { return Fingerprint(config, true); }
uint64_t OrderFingerprint(const StreamConfig& config) { return Fingerprint(config, false); }

Result<ConsumedSet> ConsumedBy(const StreamConfig& config, std::span<const std::string> positions,
                               int64_t* epoch) {
  if (positions.empty()) return InvalidArgumentError("no positions to resume from");
  std::vector<SourcePosition> all;
  for (const std::string& text : positions) {
    REEL_ASSIGN_OR_RETURN(SourcePosition p, SourcePosition::Parse(text));
    const int index = static_cast<int>(all.size());
    if (p.version != 2)
      return InvalidArgumentError("position '" + text +
                                  "' predates resuming on another number of ranks; resume on the "
                                  "number of ranks that wrote it");
    if (p.fingerprint != OrderFingerprint(config))
      return InvalidArgumentError("position '" + text +
                                  "' was saved with other files, features, seed or shuffle "
                                  "options than this data source's");
    if (p.world != static_cast<int>(positions.size()) || p.rank != index)
      return InvalidArgumentError("position " + std::to_string(index) + " of " +
                                  std::to_string(positions.size()) + " is rank " +
                                  std::to_string(p.rank) + " of " + std::to_string(p.world));
    all.push_back(std::move(p));
  }
  // Ranks that stepped independently may be in different epochs: the earliest resumes, and a
  // rank past it had delivered all of its share of it. The ranks in it are in one part of it.
  const auto first = std::min_element(
      all.begin(), all.end(), [](const auto& a, const auto& b) { return a.epoch < b.epoch; });
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].epoch == first->epoch && all[i].consumed != first->consumed)
      return InvalidArgumentError(
          "positions of rank " + std::to_string(first - all.begin()) + " and rank " +
          std::to_string(i) + " are in different parts of epoch " + std::to_string(first->epoch) +
          " ('" + positions[static_cast<size_t>(first - all.begin())] + "', '" + positions[i] +
          "')");
  REEL_ASSIGN_OR_RETURN(ConsumedSet base,
                        ConsumedSet::Decode(first->consumed, config.files.size()));
  const ConsumedSet* base_or_null = base.empty() ? nullptr : &base;
  ConsumedSet out = base;
  for (const SourcePosition& p : all)
    REEL_RETURN_IF_ERROR(AddDelivered(config, p, first->epoch,
                                      p.epoch == first->epoch ? p.records : kWholeShare,
                                      base_or_null, out));
  *epoch = first->epoch;
  return out;
}

}  // namespace reel::tfrecord
