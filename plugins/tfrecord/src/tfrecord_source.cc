// The tfrecord DataSource: options, batching, the prefetch thread, positions (see
// tfrecord_source.h). Reading and shuffling live in record_stream.cc.
#include "tfrecord_source.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "record_stream.h"
#include "reel/glob.h"
#include "reel/tensor_pool.h"
#include "source_position.h"

namespace reel::tfrecord {
namespace {

struct SourceOptions {
  int64_t batch_size = 32;
  int64_t prefetch = 2;
  bool fixed_length = false;
};

// One produced batch with the counters that go with it (accounted when the consumer takes it).
struct Item {
  Result<Batch> batch = OutOfRangeError("end of epoch");
  int64_t records = 0, bytes = 0, skipped = 0;
};

class TfRecordSource : public DataSource {
 public:
  TfRecordSource(StreamConfig config, SourceOptions options)
      : config_(std::move(config)),
        options_(options),
        pool_(TensorPool::Create(static_cast<size_t>(options.prefetch + 3) *
                                 config_.decode.features.size())) {
    shard_fingerprint_ = ShardFingerprint(config_);
    order_fingerprint_ = OrderFingerprint(config_);
    Begin(0, 0, {});
  }
  ~TfRecordSource() override { StopProducer(); }

  Result<Batch> Next() override {
    Item item = options_.prefetch > 0 ? Pop() : Produce();
    stats_.records += item.records;
    stats_.bytes += item.bytes;
    stats_.skipped_corrupt += item.skipped;
    if (item.batch.ok()) {
      delivered_ += item.records;
    } else if (item.batch.status().code() == StatusCode::kOutOfRange && !reported_end_) {
      reported_end_ = true;
      if (stats_.skipped_corrupt > 0)
        std::cerr << config_.log_prefix << ": epoch " << epoch_ << ": skipped "
                  << stats_.skipped_corrupt << " corrupt record(s) of "
                  << stats_.records + stats_.skipped_corrupt << "; first: " << first_skip_ << "\n";
    }
    return std::move(item.batch);
  }

  Status StartEpoch(int64_t epoch) override {
    if (epoch < 0) return InvalidArgumentError("epoch " + std::to_string(epoch) + " is negative");
    Begin(epoch, 0, {});
    return Status::Ok();
  }

  Result<std::string> Position() const override {
    SourcePosition p{2,
                     order_fingerprint_,
                     epoch_,
                     delivered_,
                     config_.shard.rank,
                     config_.shard.world_size,
                     consumed_text_};
    return p.Format();
  }

  Status Restore(std::string_view position) override {
    REEL_ASSIGN_OR_RETURN(SourcePosition p, SourcePosition::Parse(position));
    const std::string text(position);
    if (p.fingerprint != (p.version == 1 ? shard_fingerprint_ : order_fingerprint_))
      return InvalidArgumentError("position '" + text +
                                  "' was saved with other files, features, shard or shuffle "
                                  "options than this data source's");
    if (p.version == 2 && (p.rank != config_.shard.rank || p.world != config_.shard.world_size))
      return InvalidArgumentError(
          "position '" + text + "' is rank " + std::to_string(p.rank) + " of " +
          std::to_string(p.world) + "'s; this source reads for rank " +
          std::to_string(config_.shard.rank) + " of " + std::to_string(config_.shard.world_size) +
          " (RestoreResharded takes the positions of another number of ranks)");
    REEL_ASSIGN_OR_RETURN(ConsumedSet consumed,
                          ConsumedSet::Decode(p.consumed, config_.files.size()));
    Begin(p.epoch, p.records, std::move(consumed));
    return Status::Ok();
  }

  Status RestoreResharded(std::span<const std::string> positions) override {
    int64_t epoch = 0;
    REEL_ASSIGN_OR_RETURN(ConsumedSet consumed, ConsumedBy(config_, positions, &epoch));
    Begin(epoch, 0, std::move(consumed));
    return Status::Ok();
  }

  DataStats stats() const override { return stats_; }

 private:
  // Restarts the pipeline at `epoch`, leaving out the `consumed` records (of an earlier run) and
  // dropping the first `skip` records of this rank's share.
  void Begin(int64_t epoch, int64_t skip, ConsumedSet consumed) {
    StopProducer();
    consumed_ = std::move(consumed);
    consumed_text_ = consumed_.Encode();
    epoch_ = epoch;
    delivered_ = skip;
    stats_ = {};
    reported_end_ = false;
    first_skip_.clear();
    stream_ =
        std::make_unique<EpochStream>(&config_, epoch, consumed_.empty() ? nullptr : &consumed_);
    to_drop_ = skip;
    last_skipped_ = 0;
    final_ = Status::Ok();
    if (options_.prefetch > 0) {
      stop_ = false;
      producer_ = std::thread([this] { ProducerLoop(); });
    }
  }

  void StopProducer() {
    if (!producer_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    producer_.join();
    queue_.clear();
  }

  void ProducerLoop() {
    while (true) {
      Item item = Produce();
      bool last = !item.batch.ok();
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock,
               [&] { return stop_ || queue_.size() < static_cast<size_t>(options_.prefetch); });
      if (stop_) return;
      queue_.push_back(std::move(item));
      cv_.notify_all();
      if (last) return;
    }
  }

  Item Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    // The producer's final item (an error or the end) is put back, so the queue never runs dry
    // after the producer is gone.
    cv_.wait(lock, [&] { return !queue_.empty(); });
    Item item = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    if (!item.batch.ok()) queue_.push_back(Item{item.batch.status(), 0, 0, 0});  // stays final
    return item;
  }

  // Builds the next batch (runs on the producer thread, or inline without prefetch).
  Item Produce() {
    Item item;
    if (!final_.ok()) {
      item.batch = final_;
      return item;
    }
    std::vector<std::unique_ptr<PendingRecord>> recs;
    auto fail = [&](const Status& s) {  // an error or the end is final for this epoch
      final_ = s;
      item.batch = s;
      item.bytes = 0;
      for (auto& p : recs) stream_->Recycle(std::move(p));
      return std::move(item);
    };
    while (true) {
      Status s;
      while (static_cast<int64_t>(recs.size()) < options_.batch_size) {
        std::unique_ptr<PendingRecord> p;
        s = stream_->Next(&p);
        if (!s.ok()) break;
        if (to_drop_ > 0) {  // replaying up to a restored position: only the CRC matters
          Status crc = stream_->CheckCrc(*p, recordio::Crc32c(p->payload));
          stream_->Recycle(std::move(p));
          if (crc.ok()) {
            --to_drop_;
          } else if (Status k = stream_->SkipCorrupt(crc); !k.ok()) {
            s = k;
            break;
          }
          continue;
        }
        item.bytes += p->framed_bytes;
        recs.push_back(std::move(p));
      }
      Count(&item);
      if (!s.ok() && (s.code() != StatusCode::kOutOfRange || recs.empty())) return fail(s);
      std::vector<size_t> corrupt;
      Batch batch = BuildBatch(recs, &corrupt);
      if (corrupt.empty()) {
        item.records = static_cast<int64_t>(recs.size());
        item.batch = std::move(batch);
        for (auto& p : recs) stream_->Recycle(std::move(p));
        return item;
      }
      // Records whose bytes are not the ones written never reach a batch: skip them (or fail)
      // and fill the batch again from the records that follow.
      for (size_t r : corrupt) {
        PendingRecord& p = *recs[r];
        if (Status k = stream_->SkipCorrupt(stream_->CheckCrc(p, p.computed_crc)); !k.ok())
          return fail(k);
        item.bytes -= p.framed_bytes;
      }
      for (auto r = corrupt.rbegin(); r != corrupt.rend(); ++r) {
        stream_->Recycle(std::move(recs[*r]));
        recs.erase(recs.begin() + static_cast<std::ptrdiff_t>(*r));
      }
      Count(&item);
    }
  }

  // Adds the stream's new skips to `item`.
  void Count(Item* item) {
    item->skipped += stream_->skipped() - last_skipped_;
    last_skipped_ = stream_->skipped();
    if (first_skip_.empty()) first_skip_ = stream_->first_skip();
  }

  // Writes the batch of `recs`, computing each record's data CRC in the same pass (into its
  // computed_crc); the rows whose CRC does not match are listed in *corrupt, and then the batch
  // must not be used.
  Batch BuildBatch(const std::vector<std::unique_ptr<PendingRecord>>& recs,
                   std::vector<size_t>* corrupt) {
    const auto& specs = config_.decode.features;
    const Level level = config_.decode.level;
    const auto b = static_cast<int64_t>(recs.size());
    Batch batch;
    batch.ids.reserve(recs.size());
    for (const auto& p : recs) {
      batch.ids.emplace_back(p->rec.id);
      batch.label_ids.insert(batch.label_ids.end(), p->rec.labels.begin(), p->rec.labels.end());
      batch.label_offsets.push_back(static_cast<int64_t>(batch.label_ids.size()));
    }
    // One tensor per feature, in recycled storage. Outputs larger than the caches are written
    // with streaming stores.
    std::vector<Feature*> outs;
    std::vector<size_t> ts;
    size_t out_bytes = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      const int64_t d = specs[i].dim;
      Feature f;
      f.lengths.resize(recs.size());
      int64_t t = 1;
      for (size_t r = 0; r < recs.size(); ++r) {
        f.lengths[r] = recs[r]->rec.length(i);
        t = std::max<int64_t>(t, f.lengths[r]);
      }
      if (level == Level::kFrame && options_.fixed_length) t = config_.decode.max_frames;
      // Room for a full batch of up to the next power of two of frames (at most max_frames), so
      // one buffer serves batches of other lengths without every buffer sized for max_frames.
      int64_t room = 1;
      while (room < t) room *= 2;
      room = std::max(t, std::min(room, config_.decode.max_frames));
      f.values = pool_->Acquire({b, t, d}, static_cast<size_t>(options_.batch_size * room * d));
      out_bytes += static_cast<size_t>(f.values.size()) * sizeof(float);
      ts.push_back(static_cast<size_t>(t));
      outs.push_back(&batch.features.emplace(specs[i].name, std::move(f)).first->second);
    }
    const StoreMode mode =
        out_bytes >= kStreamingBytes ? StoreMode::kStreaming : StoreMode::kCached;
    // Each output value is written exactly once: a record's frames straight into its rows, in
    // payload order with the CRC computed in the same pass, and only its padding rows zeroed.
    std::vector<FrameSpan> spans;
    std::vector<size_t> order(specs.size());
    for (size_t r = 0; r < recs.size(); ++r) {
      PendingRecord& p = *recs[r];
      const VideoRecord& rec = p.rec;
      spans.clear();
      if (level == Level::kFrame) {
        // Each feature is one field of the payload with its frames in order, so features taken
        // in the order of their first frames give every span in payload order.
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        auto first = [&](size_t i) {
          const auto& frames = rec.features[i].frames;
          return frames.empty() ? nullptr : frames.front();
        };
        std::sort(order.begin(), order.end(),
                  [&](size_t x, size_t y) { return first(x) < first(y); });
        for (size_t i : order) {
          const auto row = static_cast<size_t>(specs[i].dim);
          float* out = outs[i]->values.data() + r * ts[i] * row;
          const auto& frames = rec.features[i].frames;
          const size_t n = std::min(frames.size(), ts[i]);
          for (size_t k = 0; k < n; ++k) spans.push_back({frames[k], row, out + k * row});
          FillZero(out + n * row, (ts[i] - n) * row, mode);
        }
      } else {
        for (size_t i = 0; i < specs.size(); ++i)
          WriteFeature(rec, i, specs[i].dim, level,
                       outs[i]->values.data() + r * static_cast<size_t>(specs[i].dim));
      }
      p.computed_crc = DequantizeWithCrc(p.payload, spans, mode);
      if (p.computed_crc != p.stored_crc) corrupt->push_back(r);
    }
    if (mode == StoreMode::kStreaming) StoreFence();  // before the batch reaches another thread
    return batch;
  }

  // Batches whose feature tensors together are at least this large are written with streaming
  // stores: they exceed a core's share of cache, so cached stores would read every line from
  // memory first.
  static constexpr size_t kStreamingBytes = size_t{2} << 20;

  StreamConfig config_;
  SourceOptions options_;
  uint64_t shard_fingerprint_ = 0;  // positions of version 1
  uint64_t order_fingerprint_ = 0;  // positions of version 2
  // Records of this epoch an earlier run had consumed (empty for a normal epoch); the stream
  // reads it, so it changes only while the producer is stopped.
  ConsumedSet consumed_;
  std::string consumed_text_ = "-";
  // Recycles batch storage: enough idle buffers for every batch in flight to come back.
  std::shared_ptr<TensorPool> pool_;

  // Producer side (the prefetch thread, or the caller without prefetch).
  std::unique_ptr<EpochStream> stream_;
  int64_t to_drop_ = 0;
  int64_t last_skipped_ = 0;
  Status final_;
  std::string first_skip_;  // read by the consumer only after the producer's final item

  // Consumer side.
  int64_t epoch_ = 0;
  int64_t delivered_ = 0;
  DataStats stats_;
  bool reported_end_ = false;

  std::thread producer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;  // guarded by mu_
  bool stop_ = false;       // guarded by mu_
};

}  // namespace

OptionSchema TfRecordSourceSchema() {
  return {
      Required(StringListOption("files", "",
                                "comma-separated file patterns (URIs or paths; '*', '?', '[...]' "
                                "glob within a path segment)")),
      StringOption("compression", "auto",
                   "auto (by suffix: .gz gzip, .zlib/.zz zlib, else none), none, zlib or gzip"),
      StringOption("level", "frame", "frame (SequenceExample) or video (Example)"),
      StringListOption("features", "",
                       "NAME:SIZE per feature, e.g. rgb:1024,audio:128; empty: rgb:1024,audio:128 "
                       "for frame level, mean_rgb:1024,mean_audio:128 for video level"),
      StringOption("id_key", "id", "feature holding the video id ('video_id' in the 2017 release)"),
      StringOption("labels_key", "labels", "int64 feature holding the class ids"),
      IntOption("num_classes", 3862, "labels must lie in [0, num_classes)"),
      IntOption("max_frames", 300, "frame level: longer videos are truncated"),
      IntOption("batch_size", 32, "videos per batch (the last batch of an epoch may be smaller)"),
      IntOption("shuffle_buffer", 0,
                "records held for shuffling (seeded by the run seed and the epoch); 0: file order"),
      IntOption("prefetch", 2, "batches a background thread prepares ahead; 0: parse in Next()"),
      BoolOption("skip_corrupt", false,
                 "skip (count and report) corrupt records instead of failing with DataLoss"),
      BoolOption("fixed_length", false,
                 "frame level: pad every batch to max_frames instead of its longest video"),
  };
}

Result<std::unique_ptr<DataSource>> CreateTfRecordSource(const Options& options,
                                                         const DataSourceContext& context) {
  StreamConfig config;
  const std::string level = options.GetString("level");
  if (level != "frame" && level != "video")
    return InvalidArgumentError("option 'level': '" + level + "' is not frame or video");
  config.decode.level = level == "frame" ? Level::kFrame : Level::kVideo;
  std::vector<std::string> feature_items = options.GetStringList("features");
  if (feature_items.empty()) {
    config.decode.features = DefaultFeatureSpecs(config.decode.level);
  } else {
    REEL_ASSIGN_OR_RETURN(config.decode.features, ParseFeatureSpecs(feature_items));
  }
  config.decode.id_key = options.GetString("id_key");
  config.decode.labels_key = options.GetString("labels_key");
  config.decode.num_classes = options.GetInt("num_classes");
  config.decode.max_frames = options.GetInt("max_frames");
  config.shuffle_buffer = options.GetInt("shuffle_buffer");
  config.skip_corrupt = options.GetBool("skip_corrupt");
  config.shard = context.shard;
  config.seed = context.seed;
  SourceOptions so{options.GetInt("batch_size"), options.GetInt("prefetch"),
                   options.GetBool("fixed_length")};
  auto positive = [](const char* name, int64_t v, int64_t min) -> Status {
    if (v >= min) return Status::Ok();
    return InvalidArgumentError("option '" + std::string(name) + "': " + std::to_string(v) +
                                " is below " + std::to_string(min));
  };
  REEL_RETURN_IF_ERROR(positive("num_classes", config.decode.num_classes, 1));
  if (config.decode.num_classes > (int64_t{1} << 31) - 1)
    return InvalidArgumentError("option 'num_classes' is too large");
  REEL_RETURN_IF_ERROR(positive("max_frames", config.decode.max_frames, 1));
  REEL_RETURN_IF_ERROR(positive("batch_size", so.batch_size, 1));
  REEL_RETURN_IF_ERROR(positive("shuffle_buffer", config.shuffle_buffer, 0));
  REEL_RETURN_IF_ERROR(positive("prefetch", so.prefetch, 0));
  if (context.shard.world_size < 1 || context.shard.rank < 0 ||
      context.shard.rank >= context.shard.world_size)
    return InvalidArgumentError("shard: rank " + std::to_string(context.shard.rank) +
                                " of world size " + std::to_string(context.shard.world_size) +
                                " is not valid");
  if (context.storage == nullptr)
    return InvalidArgumentError("tfrecord data source needs a storage resolver");
  config.log_prefix = "tfrecord (rank " + std::to_string(context.shard.rank) + ")";

  const std::string compression = options.GetString("compression");
  for (const std::string& pattern : options.GetStringList("files")) {
    REEL_ASSIGN_OR_RETURN(Storage * storage, context.storage->ForUri(pattern));
    REEL_ASSIGN_OR_RETURN(auto found, storage->Glob(pattern));
    if (found.empty()) return NoFileMatches(pattern).WithContext("option 'files'");
    for (const ObjectInfo& info : found) {
      REEL_ASSIGN_OR_RETURN(auto c, recordio::ParseCompression(compression, info.uri));
      config.files.push_back({storage, info.uri, c});
    }
  }
  if (config.files.empty()) return InvalidArgumentError("option 'files' is empty");
  std::sort(config.files.begin(), config.files.end(),
            [](const SourceFile& a, const SourceFile& b) { return a.uri < b.uri; });
  config.files.erase(
      std::unique(config.files.begin(), config.files.end(),
                  [](const SourceFile& a, const SourceFile& b) { return a.uri == b.uri; }),
      config.files.end());
  return std::unique_ptr<DataSource>(new TfRecordSource(std::move(config), so));
}

Status NoFileMatches(const std::string& pattern) {
  std::string message = "no file matches '" + pattern + "'";
  if (!pattern.empty() && pattern[0] != '/' && pattern.find("://") == std::string::npos) {
    std::error_code ec;  // a relative local pattern: relative to what?
    const std::filesystem::path cwd = std::filesystem::current_path(ec);
    if (!ec) message += " (relative to the working directory " + cwd.string() + ")";
  }
  return NotFoundError(message);
}

}  // namespace reel::tfrecord
