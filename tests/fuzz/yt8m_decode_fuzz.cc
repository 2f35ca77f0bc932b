// libFuzzer target: one TFRecord payload (tf.train.Example or SequenceExample, as in YouTube-8M
// shards) decoded into a Batch. The input is the payload; it goes through
//   * DecodeVideo + WriteFeature + DequantizeWithCrc, as frame-level and as video-level data, at
//     the real widths (rgb 1024, audio 128) and at the small widths of the synthetic seeds;
//   * SummarizeRecord (what `reel inspect` prints);
//   * the whole `tfrecord` data source over an in-memory file holding the payload twice, so batch
//     assembly, padding and the CRC check see it too. Every batch it yields must validate.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reel/batch.h"
#include "reel/glob.h"
#include "reel/recordio.h"
#include "reel/testing/mem_file.h"
#include "tfrecord_source.h"
#include "yt8m.h"

namespace reel::tfrecord {
namespace {

constexpr int64_t kClasses = 4000;  // above YouTube-8M's 3862, so real labels are in range

// One file, read from memory; the data source reaches it through the resolver.
class OneFileStorage : public Storage, public StorageResolver {
 public:
  explicit OneFileStorage(std::string bytes) : bytes_(std::move(bytes)) {}
  Result<Storage*> ForUri(std::string_view) override { return static_cast<Storage*>(this); }
  Result<std::vector<ObjectInfo>> Glob(std::string_view pattern) override {
    if (!GlobMatch(pattern, kUri)) return std::vector<ObjectInfo>{};
    return std::vector<ObjectInfo>{{kUri, bytes_.size()}};
  }
  Result<std::unique_ptr<RandomAccessFile>> OpenRead(std::string_view) override {
    return std::unique_ptr<RandomAccessFile>(new testing::MemFile(kUri, bytes_));
  }
  Result<std::unique_ptr<WritableFile>> OpenWrite(std::string_view uri) override {
    return UnimplementedError(std::string(uri) + ": read-only");
  }
  Status Delete(std::string_view uri) override {
    return UnimplementedError(std::string(uri) + ": read-only");
  }
  static constexpr const char* kUri = "mem/fuzz.tfrecord";

 private:
  std::string bytes_;
};

void Require(bool ok) {
  if (!ok) std::abort();
}

void DecodeDirectly(std::string_view payload, Level level, int64_t rgb, int64_t audio) {
  DecodeConfig config;
  config.level = level;
  config.num_classes = kClasses;
  config.max_frames = 300;
  const std::string prefix = level == Level::kVideo ? "mean_" : "";
  config.features = {{prefix + "rgb", rgb}, {prefix + "audio", audio}};
  VideoRecord rec;
  if (!DecodeVideo(payload, config, &rec).ok()) return;
  std::vector<FrameSpan> spans;
  std::vector<std::vector<float>> out(config.features.size());
  for (size_t i = 0; i < config.features.size(); ++i) {
    const int64_t dim = config.features[i].dim, length = rec.length(i);
    Require(length >= 1 && length <= config.max_frames);
    out[i].resize(static_cast<size_t>(length * dim));
    WriteFeature(rec, i, dim, level, out[i].data());
    if (level == Level::kFrame)
      for (const uint8_t* f : rec.features[i].frames)
        spans.push_back({f, static_cast<size_t>(dim), out[i].data()});
  }
  // The batch builder's fused pass: spans in payload order, and the CRC must be the payload's.
  std::sort(spans.begin(), spans.end(),
            [](const FrameSpan& a, const FrameSpan& b) { return a.src < b.src; });
  for (size_t k = 1; k < spans.size(); ++k)
    if (spans[k].src < spans[k - 1].src + spans[k - 1].n) return;  // overlapping: not a batch input
  Require(DequantizeWithCrc(payload, spans, StoreMode::kStreaming) == recordio::Crc32c(payload));
  StoreFence();
}

// The source's options, parsed once per level: they do not depend on the input, and parsing
// them for every input was an eighth of the target's time.
const Options& SourceOptions(const char* level, const char* features) {
  static std::map<std::string, Options> parsed;
  auto it = parsed.find(level);
  if (it == parsed.end()) {
    auto options = ParseOptions(TfRecordSourceSchema(),
                                {{"files", "mem/*.tfrecord"},
                                 {"level", level},
                                 {"features", features},
                                 {"num_classes", std::to_string(kClasses)},
                                 {"batch_size", "2"},
                                 {"prefetch", "0"}},
                                "fuzz");
    Require(options.ok());
    it = parsed.emplace(level, *std::move(options)).first;
  }
  return it->second;
}

void ThroughTheSource(const std::string& payload, const char* level, const char* features) {
  std::string file;
  recordio::AppendFramedRecord(payload, &file);
  recordio::AppendFramedRecord(payload, &file);
  OneFileStorage storage(std::move(file));
  auto source =
      CreateTfRecordSource(SourceOptions(level, features), DataSourceContext{{}, 1, &storage});
  Require(source.ok());
  for (int i = 0; i < 4; ++i) {
    Result<Batch> batch = (*source)->Next();
    if (!batch.ok()) return;  // a clear error (or the end of the epoch) is all we ask
    Require(ValidateBatch(*batch, kClasses).ok());
  }
}

}  // namespace
}  // namespace reel::tfrecord

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reel::tfrecord;
  const std::string payload(reinterpret_cast<const char*>(data), size);
  DecodeDirectly(payload, Level::kFrame, 1024, 128);
  DecodeDirectly(payload, Level::kFrame, 16, 8);
  DecodeDirectly(payload, Level::kVideo, 1024, 128);
  DecodeDirectly(payload, Level::kVideo, 16, 8);
  RecordSummary summary;
  (void)SummarizeRecord(payload, "id", "labels", &summary);
  ThroughTheSource(payload, "frame", "rgb:16,audio:8");
  ThroughTheSource(payload, "video", "mean_rgb:1024,mean_audio:128");
  return 0;
}
