// The tfrecord DataSource: options, batching, the prefetch thread, positions (see
// tfrecord_source.h). Reading and shuffling live in record_stream.cc.
#include "tfrecord_source.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include "record_stream.h"
#include "reel/glob.h"

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

uint64_t Fnv1a(uint64_t h, std::string_view s) {
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull;  // field separator
}

class TfRecordSource : public DataSource {
 public:
  TfRecordSource(StreamConfig config, SourceOptions options)
      : config_(std::move(config)), options_(options) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const auto& f : config_.files) h = Fnv1a(h, f.uri);
    for (const auto& f : config_.decode.features)
      h = Fnv1a(h, f.name + ":" + std::to_string(f.dim));
    for (int64_t v : {int64_t{config_.decode.level == Level::kFrame}, config_.decode.max_frames,
                      int64_t{config_.shard.rank}, int64_t{config_.shard.world_size},
                      static_cast<int64_t>(config_.seed), config_.shuffle_buffer,
                      int64_t{config_.skip_corrupt}})
      h = Fnv1a(h, std::to_string(v));
    fingerprint_ = h;
    Begin(0, 0);
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
    Begin(epoch, 0);
    return Status::Ok();
  }

  Result<std::string> Position() const override {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "tfrecord/v1 fp=%016llx epoch=%lld records=%lld",
                  static_cast<unsigned long long>(fingerprint_), static_cast<long long>(epoch_),
                  static_cast<long long>(delivered_));
    return std::string(buf);
  }

  Status Restore(std::string_view position) override {
    unsigned long long fp = 0;
    long long epoch = -1, records = -1;
    std::string text(position);
    int end = 0;
    if (std::sscanf(text.c_str(), "tfrecord/v1 fp=%llx epoch=%lld records=%lld%n", &fp, &epoch,
                    &records, &end) != 3 ||
        static_cast<size_t>(end) != text.size() || epoch < 0 || records < 0)
      return InvalidArgumentError("'" + text + "' is not a tfrecord position");
    if (fp != fingerprint_)
      return InvalidArgumentError("position '" + text +
                                  "' was saved with other files, features, shard or shuffle "
                                  "options than this data source's");
    Begin(epoch, records);
    return Status::Ok();
  }

  DataStats stats() const override { return stats_; }

 private:
  // Restarts the pipeline at `epoch`, dropping its first `skip` records.
  void Begin(int64_t epoch, int64_t skip) {
    StopProducer();
    epoch_ = epoch;
    delivered_ = skip;
    stats_ = {};
    reported_end_ = false;
    first_skip_.clear();
    stream_ = std::make_unique<EpochStream>(&config_, epoch);
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
    Status s;
    while (static_cast<int64_t>(recs.size()) < options_.batch_size) {
      std::unique_ptr<PendingRecord> p;
      s = stream_->Next(&p);
      if (!s.ok()) break;
      if (to_drop_ > 0) {  // replaying up to a restored position
        --to_drop_;
        stream_->Recycle(std::move(p));
        continue;
      }
      item.bytes += p->framed_bytes;
      recs.push_back(std::move(p));
    }
    item.skipped = stream_->skipped() - last_skipped_;
    last_skipped_ = stream_->skipped();
    if (first_skip_.empty()) first_skip_ = stream_->first_skip();
    if (!s.ok() && (s.code() != StatusCode::kOutOfRange || recs.empty())) {
      final_ = s;  // an error or the end is final for this epoch
      item.batch = s;
      item.bytes = 0;
      for (auto& p : recs) stream_->Recycle(std::move(p));
      return item;
    }
    item.records = static_cast<int64_t>(recs.size());
    item.batch = BuildBatch(recs);
    for (auto& p : recs) stream_->Recycle(std::move(p));
    return item;
  }

  Batch BuildBatch(const std::vector<std::unique_ptr<PendingRecord>>& recs) {
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
      // Each output value is written exactly once: decoded frames straight into an uninitialised
      // tensor, then only the padding rows zeroed, while the video's rows are still in cache.
      f.values = Tensor::Uninitialized({b, t, d});
      const auto row = static_cast<size_t>(d);
      for (size_t r = 0; r < recs.size(); ++r) {
        const FeatureView& fv = recs[r]->rec.features[i];
        float* out = f.values.data() + r * static_cast<size_t>(t) * row;
        float* const end = out + static_cast<size_t>(t) * row;
        if (level == Level::kFrame) {
          for (const uint8_t* frame : fv.frames) {
            if (out == end) break;  // never past this video's T rows
            DequantizeBytes(frame, row, out);
            out += row;
          }
        } else {
          WriteFeature(recs[r]->rec, i, d, level, out);
          out += row;
        }
        std::fill(out, end, 0.0f);
      }
      batch.features.emplace(specs[i].name, std::move(f));
    }
    return batch;
  }

  StreamConfig config_;
  SourceOptions options_;
  uint64_t fingerprint_ = 0;

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
    if (found.empty()) return NotFoundError("option 'files': no file matches '" + pattern + "'");
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

}  // namespace reel::tfrecord
