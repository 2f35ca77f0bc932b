// Helpers for the tfrecord DataSource tests (source_test.cc, fault_test.cc): small synthetic
// shards, a fixture that builds sources over a temporary directory, draining an epoch, and
// record offsets and byte flips for corruption.
#ifndef REEL_PLUGINS_TFRECORD_TESTS_SOURCE_TEST_UTIL_H_
#define REEL_PLUGINS_TFRECORD_TESTS_SOURCE_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "local_storage.h"
#include "reel/recordio.h"
#include "synth.h"
#include "test_util.h"
#include "tfrecord_source.h"

namespace reel::tfrecord {

inline constexpr int kRgb = 16, kAudio = 8;

inline SynthOptions SmallSynth(const std::string& dir, int64_t videos, int64_t shards) {
  SynthOptions o;
  o.out = dir;
  o.videos = videos;
  o.classes = 12;
  o.shards = shards;
  o.min_frames = 2;
  o.max_frames = 9;
  o.rgb_dim = kRgb;
  o.audio_dim = kAudio;
  o.seed = 5;
  return o;
}

// YouTube-8M feature widths (rgb 1024, audio 128 bytes per frame): batches of megabytes.
inline SynthOptions FullWidthSynth(const std::string& dir, int64_t videos, int64_t shards,
                                   int64_t min_frames, int64_t max_frames) {
  SynthOptions o = SmallSynth(dir, videos, shards);
  o.rgb_dim = 1024;
  o.audio_dim = 128;
  o.min_frames = min_frames;
  o.max_frames = max_frames;
  return o;
}

class SourceTest : public ::testing::Test {
 protected:
  Result<std::unique_ptr<DataSource>> Make(std::map<std::string, std::string> given,
                                           ShardSpec shard = {}, uint64_t seed = 9) {
    return MakeWith(resolver_, std::move(given), shard, seed);
  }
  // As Make, reading through `storage` (which must outlive the source).
  Result<std::unique_ptr<DataSource>> MakeWith(StorageResolver& storage,
                                               std::map<std::string, std::string> given,
                                               ShardSpec shard = {}, uint64_t seed = 9) {
    given.emplace("features", "rgb:16,audio:8");
    given.emplace("num_classes", "12");
    given.emplace("prefetch", "0");
    auto options = ParseOptions(TfRecordSourceSchema(), given, "data 'tfrecord'");
    if (!options.ok()) return options.status();
    DataSourceContext ctx{shard, seed, &storage};
    return CreateTfRecordSource(*options, ctx);
  }
  std::vector<std::string> Write(const SynthOptions& o) {
    auto uris = WriteSynthetic(resolver_, o);
    EXPECT_TRUE(uris.ok()) << uris.status();
    return uris.ok() ? *uris : std::vector<std::string>{};
  }
  reel::testing::LocalResolver resolver_;
  reel::testing::TempDir dir_;
};

// Reads the rest of the epoch; ids in delivery order.
inline std::vector<std::string> Drain(DataSource& src, std::vector<Batch>* batches = nullptr) {
  std::vector<std::string> ids;
  while (true) {
    Result<Batch> b = src.Next();
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), StatusCode::kOutOfRange) << b.status();
      break;
    }
    EXPECT_TRUE(ValidateBatch(*b, 12).ok());
    ids.insert(ids.end(), b->ids.begin(), b->ids.end());
    if (batches) batches->push_back(std::move(*b));
  }
  return ids;
}

// Offsets of each record in a plain TFRecord file.
inline std::vector<uint64_t> RecordOffsets(const std::string& path) {
  reel::testing::LocalStorage storage;
  auto file = storage.OpenRead(path);
  recordio::RecordReader r(file->get());
  std::vector<uint64_t> offsets;
  std::string rec;
  while (true) {
    uint64_t off = r.offset();
    if (!r.ReadRecord(&rec).ok()) break;
    offsets.push_back(off);
  }
  return offsets;
}

inline void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_TESTS_SOURCE_TEST_UTIL_H_
