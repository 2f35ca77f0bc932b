// YouTube-8M record decoding: one TFRecord payload (a tf.train.Example for video-level data, a
// tf.train.SequenceExample for frame-level data) into views of its id, labels and features, plus
// the dequantization of frame bytes. Wire formats: proto/example.proto and docs/formats.md.
//
// Decoding walks the protobuf wire format with protobuf's CodedInputStream over the payload bytes,
// without building messages or copying feature data: a VideoRecord holds views into the payload,
// which must stay live and unchanged while the record is used. Unknown fields and unknown feature
// keys are skipped (real shards end every Example with an empty field 2).
//
// Thread-safety: pure functions; a VideoRecord is a value owned by its caller.
#ifndef REEL_PLUGINS_TFRECORD_SRC_YT8M_H_
#define REEL_PLUGINS_TFRECORD_SRC_YT8M_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dequantize.h"
#include "reel/status.h"

namespace reel::tfrecord {

enum class Level { kVideo, kFrame };

struct FeatureSpec {
  std::string name;  // feature key in the record, and the Batch feature name
  int64_t dim = 0;   // values per frame (frame level: bytes per frame; video level: floats)
};

// Parses "rgb:1024,audio:128" style items; InvalidArgument naming the bad item.
Result<std::vector<FeatureSpec>> ParseFeatureSpecs(const std::vector<std::string>& items);
// "rgb:1024,audio:128" for frame level, "mean_rgb:1024,mean_audio:128" for video level.
std::vector<FeatureSpec> DefaultFeatureSpecs(Level level);

struct DecodeConfig {
  Level level = Level::kFrame;
  std::string id_key = "id";          // "video_id" in the 2017 release
  std::string labels_key = "labels";  // a missing labels feature means no labels (test splits)
  std::vector<FeatureSpec> features;
  int64_t num_classes = 3862;
  int64_t max_frames = 300;  // frame level: longer videos are truncated
};

struct FeatureView {
  // Frame level: the first min(total_frames, max_frames) frames, each `dim` bytes in the payload.
  std::vector<const uint8_t*> frames;
  int64_t total_frames = 0;
  // Video level: `dim` little-endian floats, in the payload (packed) or in `unpacked`.
  const char* packed_floats = nullptr;
  std::vector<float> unpacked;
};

struct VideoRecord {
  std::string_view id;
  std::vector<int32_t> labels;
  std::vector<FeatureView> features;  // one per DecodeConfig::features, same order
  // Frames kept for feature i (1 for video level).
  int32_t length(size_t i) const;
};

// Decodes `payload` into *out (its vectors' capacity is reused). Errors carry no file context;
// callers prefix "<uri>: offset N: ". DataLoss: unparsable wire data, a missing id or feature, a
// video with no frames, a frame whose byte count is not `dim`, a float list of the wrong length.
// InvalidArgument: a label outside [0, num_classes) (a configuration mismatch, not corruption).
Status DecodeVideo(std::string_view payload, const DecodeConfig& config, VideoRecord* out);

// Copies the dequantized features of `rec` for feature `i` into `dst` ([T, dim] row-major, rows
// past the record's length untouched). REQUIRES: length(i) <= T.
void WriteFeature(const VideoRecord& rec, size_t i, int64_t dim, Level level, float* dst,
                  StoreMode mode = StoreMode::kCached);

// A summary of any Example/SequenceExample for `reel inspect`: every feature with its kind and
// value count, every feature list with its frame count and values per frame.
struct RecordSummary {
  struct Entry {
    std::string name;
    char kind = '?';      // 'b' bytes, 'f' float, 'i' int64, '?' empty
    int64_t length = 0;   // values (bytes: total bytes of the first value for lists)
    int64_t frames = -1;  // feature lists only
  };
  std::string id;
  std::vector<int64_t> labels;
  std::vector<Entry> features;       // Example.features / SequenceExample.context
  std::vector<Entry> feature_lists;  // SequenceExample.feature_lists
};
Status SummarizeRecord(std::string_view payload, std::string_view id_key,
                       std::string_view labels_key, RecordSummary* out);

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_SRC_YT8M_H_
