// The tfrecord DataSource over synthetic and real shards: contents, sharding, shuffling, resume,
// compression and the corruption policy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "example.pb.h"
#include "local_storage.h"
#include "reel/recordio.h"
#include "source_test_util.h"
#include "synth.h"
#include "test_util.h"
#include "tfrecord_source.h"

namespace reel::tfrecord {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Every value of every batch against the synthetic record, decoded independently by protobuf:
// dequantized frames, zero padding, lengths and labels.
void ExpectBatchesMatch(const SynthOptions& o, const std::vector<Batch>& batches) {
  for (const Batch& b : batches) {
    for (int64_t i = 0; i < b.size(); ++i) {
      int64_t index = std::stoll(b.ids[i].substr(1));
      SynthVideo want = MakeSyntheticVideo(o, index);
      reel::tf::SequenceExample se;
      ASSERT_TRUE(se.ParseFromString(want.payload));
      auto labels = b.labels(i);
      ASSERT_EQ(std::vector<int64_t>(labels.begin(), labels.end()), want.labels);
      for (const char* name : {"rgb", "audio"}) {
        const auto& frames = se.feature_lists().feature_list().at(name).feature();
        const Feature& f = b.features.at(name);
        const int64_t t_max = f.values.dim(1), dim = f.values.dim(2);
        ASSERT_EQ(dim, std::string(name) == "rgb" ? o.rgb_dim : o.audio_dim);
        ASSERT_EQ(f.lengths[i], frames.size());
        for (int64_t t = 0; t < t_max; ++t)
          for (int64_t d = 0; d < dim; ++d) {
            float got = f.values.data()[(i * t_max + t) * dim + d];
            if (t >= frames.size()) {
              ASSERT_EQ(got, 0.0f) << b.ids[i] << " " << name << " t " << t << " d " << d;
            } else {
              auto q = static_cast<uint8_t>(frames[t].bytes_list().value(0)[d]);
              ASSERT_NEAR(got, q * 4.0 / 255.0 + 4.0 / 512.0 - 2.0, 1e-6)
                  << b.ids[i] << " " << name << " t " << t << " d " << d;
            }
          }
      }
    }
  }
}

TEST_F(SourceTest, BatchesMatchTheSyntheticRecords) {
  SynthOptions o = SmallSynth(dir_.path(), 23, 3);
  Write(o);
  auto src = Make({{"files", dir_ / "train*.tfrecord"}, {"batch_size", "5"}});
  ASSERT_TRUE(src.ok()) << src.status();
  std::vector<Batch> batches;
  std::vector<std::string> ids = Drain(**src, &batches);
  ASSERT_EQ(ids.size(), 23u);
  EXPECT_EQ(batches.size(), 5u);
  EXPECT_EQ(batches.back().size(), 3);
  EXPECT_EQ((*src)->stats().records, 23);
  ExpectBatchesMatch(o, batches);
}

// YouTube-8M widths: batches of several megabytes, written with streaming stores into recycled
// storage. Every batch is held to the end, so storage reused while a batch is alive would show.
TEST_F(SourceTest, LargeBatchesMatchWhileEarlierOnesAreHeld) {
  SynthOptions o = FullWidthSynth(dir_.path(), 21, 2, 60, 130);
  Write(o);
  for (const char* prefetch : {"0", "2"}) {
    auto src = Make({{"files", dir_ / "train*.tfrecord"},
                     {"features", "rgb:1024,audio:128"},
                     {"batch_size", "8"},
                     {"prefetch", prefetch}});
    ASSERT_TRUE(src.ok()) << src.status();
    std::vector<Batch> batches;
    for (int epoch = 0; epoch < 2; ++epoch) {
      ASSERT_TRUE((*src)->StartEpoch(epoch).ok());
      EXPECT_EQ(Drain(**src, &batches).size(), 21u);
    }
    ASSERT_EQ(batches.size(), 6u);
    EXPECT_GE(batches[0].features.at("rgb").values.size() * 4, 2 << 20);  // streaming size
    ExpectBatchesMatch(o, batches);
  }
}

// Batch storage is sized by the batch's own length (rounded up), never by max_frames alone: a
// limit far beyond any video must not reserve memory for it.
TEST_F(SourceTest, HugeMaxFramesReservesNothingForIt) {
  SynthOptions o = SmallSynth(dir_.path(), 9, 1);
  Write(o);
  auto src = Make({{"files", dir_ / "*.tfrecord"},
                   {"batch_size", "4"},
                   {"max_frames", std::to_string(int64_t{1} << 40)}});
  ASSERT_TRUE(src.ok()) << src.status();
  std::vector<Batch> batches;
  EXPECT_EQ(Drain(**src, &batches).size(), 9u);
  ExpectBatchesMatch(o, batches);
}

TEST_F(SourceTest, FixedLengthPadsToMaxFrames) {
  Write(SmallSynth(dir_.path(), 6, 1));
  auto src = Make({{"files", dir_ / "*.tfrecord"}, {"fixed_length", "true"}, {"max_frames", "7"}});
  ASSERT_TRUE(src.ok()) << src.status();
  Result<Batch> b = (*src)->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->features.at("rgb").values.shape(), (Shape{6, 7, kRgb}));
  for (int32_t len : b->features.at("rgb").lengths) EXPECT_LE(len, 7);
}

// Every record exactly once per epoch over 1..5 ranks, by file (4 files) and by record (1 file),
// with and without shuffling, in two epochs.
TEST_F(SourceTest, ShardingReadsEveryRecordExactlyOnce) {
  reel::testing::TempDir one_file_dir;
  Write(SmallSynth(dir_.path(), 37, 4));
  SynthOptions single = SmallSynth(one_file_dir.path(), 37, 1);
  Write(single);
  for (const std::string& pattern : {dir_ / "*.tfrecord", one_file_dir / "*.tfrecord"}) {
    for (const char* shuffle : {"0", "8"}) {
      for (int world = 1; world <= 5; ++world) {
        for (int64_t epoch = 0; epoch < 2; ++epoch) {
          std::multiset<std::string> seen;
          for (int rank = 0; rank < world; ++rank) {
            auto src = Make({{"files", pattern}, {"batch_size", "4"}, {"shuffle_buffer", shuffle}},
                            {rank, world});
            ASSERT_TRUE(src.ok()) << src.status();
            ASSERT_TRUE((*src)->StartEpoch(epoch).ok());
            for (const auto& id : Drain(**src)) seen.insert(id);
          }
          ASSERT_EQ(seen.size(), 37u) << pattern << " world " << world << " shuffle " << shuffle;
          for (int v = 0; v < 37; ++v) {
            char id[16];
            std::snprintf(id, sizeof(id), "v%07d", v);
            ASSERT_EQ(seen.count(id), 1u) << id << " world " << world;
          }
        }
      }
    }
  }
}

TEST_F(SourceTest, ShuffleIsSeededPerEpoch) {
  Write(SmallSynth(dir_.path(), 40, 2));
  auto order = [&](uint64_t seed, int64_t epoch) {
    auto src = Make({{"files", dir_ / "*.tfrecord"}, {"shuffle_buffer", "16"}}, {}, seed);
    EXPECT_TRUE(src.ok());
    EXPECT_TRUE((*src)->StartEpoch(epoch).ok());
    return Drain(**src);
  };
  auto plain = Make({{"files", dir_ / "*.tfrecord"}});
  ASSERT_TRUE(plain.ok());
  std::vector<std::string> file_order = Drain(**plain);
  std::vector<std::string> a = order(1, 0), b = order(1, 0), c = order(1, 1), d = order(2, 0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  EXPECT_NE(a, file_order);
  std::sort(a.begin(), a.end());
  std::sort(file_order.begin(), file_order.end());
  EXPECT_EQ(a, file_order);
}

// Resuming mid-epoch from a saved position yields exactly the records that were left, for
// shuffled and plain orders, with and without prefetching, and with another batch size.
TEST_F(SourceTest, ResumeYieldsExactlyTheRest) {
  Write(SmallSynth(dir_.path(), 41, 3));
  for (const char* shuffle : {"0", "10"}) {
    for (const char* prefetch : {"0", "2"}) {
      std::map<std::string, std::string> opts = {
          {"files", dir_ / "*.tfrecord"}, {"batch_size", "4"}, {"shuffle_buffer", shuffle}};
      auto src = Make(opts, {0, 1});
      ASSERT_TRUE(src.ok());
      ASSERT_TRUE((*src)->StartEpoch(1).ok());
      std::vector<std::string> first;
      for (int i = 0; i < 3; ++i) {
        auto b = (*src)->Next();
        ASSERT_TRUE(b.ok());
        first.insert(first.end(), b->ids.begin(), b->ids.end());
      }
      Result<std::string> pos = (*src)->Position();
      ASSERT_TRUE(pos.ok());
      std::vector<std::string> rest = Drain(**src);
      EXPECT_EQ(first.size() + rest.size(), 41u);

      opts["prefetch"] = prefetch;
      opts["batch_size"] = "7";
      auto resumed = Make(opts, {0, 1});
      ASSERT_TRUE(resumed.ok());
      ASSERT_TRUE((*resumed)->Restore(*pos).ok());
      EXPECT_EQ(Drain(**resumed), rest) << "shuffle " << shuffle << " prefetch " << prefetch;
      // The next epoch after a resumed one starts whole.
      ASSERT_TRUE((*resumed)->StartEpoch(2).ok());
      EXPECT_EQ(Drain(**resumed).size(), 41u);
    }
  }
}

TEST_F(SourceTest, RestoreRejectsForeignPositions) {
  Write(SmallSynth(dir_.path(), 5, 1));
  auto a = Make({{"files", dir_ / "*.tfrecord"}, {"shuffle_buffer", "3"}});
  auto b = Make({{"files", dir_ / "*.tfrecord"}, {"shuffle_buffer", "4"}});
  ASSERT_TRUE(a.ok() && b.ok());
  auto pos = (*a)->Position();
  ASSERT_TRUE(pos.ok());
  EXPECT_TRUE((*a)->Restore(*pos).ok());
  Status s = (*b)->Restore(*pos);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("other files"));
  EXPECT_EQ((*a)->Restore("epoch 3").code(), StatusCode::kInvalidArgument);
}

TEST_F(SourceTest, PrefetchGivesTheSameBatches) {
  Write(SmallSynth(dir_.path(), 30, 2));
  auto a = Make({{"files", dir_ / "*.tfrecord"}, {"shuffle_buffer", "7"}, {"batch_size", "4"}});
  auto b = Make({{"files", dir_ / "*.tfrecord"},
                 {"shuffle_buffer", "7"},
                 {"batch_size", "4"},
                 {"prefetch", "3"}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Drain(**a), Drain(**b));
  EXPECT_EQ((*b)->Next().status().code(), StatusCode::kOutOfRange);  // stays at the end
}

TEST_F(SourceTest, CompressedShardsByOptionAndSuffix) {
  for (auto c : {recordio::Compression::kGzip, recordio::Compression::kZlib}) {
    reel::testing::TempDir dir;
    SynthOptions o = SmallSynth(dir.path(), 11, 2);
    o.compression = c;
    auto uris = Write(o);
    ASSERT_EQ(uris.size(), 2u);
    auto src = Make({{"files", dir / "*"}});
    ASSERT_TRUE(src.ok());
    EXPECT_EQ(Drain(**src).size(), 11u);
    auto forced = Make({{"files", dir / "*"}, {"compression", "none"}});
    ASSERT_TRUE(forced.ok());
    EXPECT_EQ((*forced)->Next().status().code(), StatusCode::kDataLoss);
  }
}

TEST_F(SourceTest, RealVideoLevelShards) {
  auto options = ParseOptions(TfRecordSourceSchema(),
                              {{"files", std::string(REEL_DATA_DIR) + "/yt8m/validate*"},
                               {"level", "video"},
                               {"batch_size", "100"}});
  ASSERT_TRUE(options.ok());
  auto src = CreateTfRecordSource(*options, {{0, 1}, 0, &resolver_});
  ASSERT_TRUE(src.ok()) << src.status();
  Result<Batch> first = (*src)->Next();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->ids[0], "02aa");
  auto labels = first->labels(0);
  EXPECT_EQ(std::vector<int32_t>(labels.begin(), labels.end()),
            (std::vector<int32_t>{3, 4, 9, 34}));
  EXPECT_EQ(first->features.at("mean_rgb").values.shape(), (Shape{100, 1, 1024}));
  EXPECT_EQ(first->features.at("mean_audio").values.shape(), (Shape{100, 1, 128}));
  EXPECT_TRUE(ValidateBatch(*first, 3862).ok());
  int64_t total = first->size();
  while (true) {
    auto b = (*src)->Next();
    if (!b.ok()) break;
    total += b->size();
  }
  EXPECT_EQ(total, 284 + 305 + 313);
  EXPECT_EQ((*src)->stats().records, 902);
  EXPECT_EQ((*src)->stats().bytes, 1338030 + 1436927 + 1474558);
}

TEST_F(SourceTest, MissingFilesAndBadOptions) {
  auto src = Make({{"files", dir_ / "nothing*.tfrecord"}});
  EXPECT_EQ(src.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(src.status().message(), HasSubstr("nothing*.tfrecord"));
  EXPECT_THAT(src.status().message(), Not(HasSubstr("relative to")));  // an absolute pattern
  // A relative pattern says what it was relative to, the usual cause of a config run elsewhere.
  auto relative = Make({{"files", "./nothing_here*.tfrecord"}});
  EXPECT_EQ(relative.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(relative.status().message(),
              HasSubstr("option 'files': no file matches './nothing_here*.tfrecord' "
                        "(relative to the working directory " +
                        std::filesystem::current_path().string() + ")"));
  Write(SmallSynth(dir_.path(), 3, 1));
  EXPECT_EQ(Make({{"files", dir_ / "*"}, {"level", "clip"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Make({{"files", dir_ / "*"}, {"batch_size", "0"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Make({{"files", dir_ / "*"}, {"compression", "lz4"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Make({{"files", dir_ / "*"}}, {3, 2}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SourceTest, CorruptionFailsNamingFileAndOffsetOrIsSkippedAndCounted) {
  auto uris = Write(SmallSynth(dir_.path(), 20, 2));  // 10 records per file
  const std::string bad = uris[1];
  auto off = RecordOffsets(bad);
  ASSERT_EQ(off.size(), 10u);
  FlipByte(bad, off[2] + 12 + 40);  // payload of record 2
  FlipByte(bad, off[5] - 1);        // data CRC of record 4
  for (int world : {1, 2, 3}) {
    std::multiset<std::string> seen;
    int64_t skipped = 0;
    for (int rank = 0; rank < world; ++rank) {
      auto src = Make({{"files", dir_ / "*.tfrecord"}, {"skip_corrupt", "true"}}, {rank, world});
      ASSERT_TRUE(src.ok());
      for (const auto& id : Drain(**src)) seen.insert(id);
      skipped += (*src)->stats().skipped_corrupt;
    }
    EXPECT_EQ(seen.size(), 18u) << "world " << world;
    EXPECT_EQ(skipped, 2) << "world " << world;
    EXPECT_EQ(seen.count("v0000005"), 0u);  // record 2 of shard 1 holds video 5
    EXPECT_EQ(seen.count("v0000009"), 0u);  // record 4 of shard 1 holds video 9
    EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 18u);
  }
  auto strict = Make({{"files", dir_ / "*.tfrecord"}, {"batch_size", "100"}});
  ASSERT_TRUE(strict.ok());
  Status s = (*strict)->Next().status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(bad + ": offset " + std::to_string(off[2]) + ": data CRC"));
}

// A flipped bit inside frame bytes leaves a record that still decodes; only its data CRC, which
// the source computes while dequantizing, tells. Such records never reach a batch: strict mode
// fails naming file and offset, skip_corrupt refills the batch from the records that follow, and
// a restored position skips them the same way.
TEST_F(SourceTest, CorruptFrameBytesNeverReachABatch) {
  SynthOptions o = FullWidthSynth(dir_.path(), 20, 1, 40, 60);
  const std::string path = Write(o)[0];
  auto off = RecordOffsets(path);
  ASSERT_EQ(off.size(), 20u);
  for (int r : {3, 4, 9}) {
    const uint64_t middle = off[r] + 12 + (off[r + 1] - off[r] - 16) / 2;
    FlipByte(path, middle);
    // The flip is where this test means it: the payload still decodes.
    auto storage = resolver_.storage().OpenRead(path);
    recordio::RecordReader reader(storage->get());
    std::string payload;
    uint32_t stored = 0;
    for (int k = 0; k <= r; ++k) ASSERT_TRUE(reader.ReadRecordDeferringCrc(&payload, &stored).ok());
    DecodeConfig config;
    config.features = {{"rgb", 1024}, {"audio", 128}};
    config.num_classes = 12;
    VideoRecord rec;
    ASSERT_TRUE(DecodeVideo(payload, config, &rec).ok()) << r;
    ASSERT_NE(recordio::Crc32c(payload), stored) << r;
  }
  std::map<std::string, std::string> opts = {
      {"files", path}, {"features", "rgb:1024,audio:128"}, {"batch_size", "8"}};
  auto strict = Make(opts);
  ASSERT_TRUE(strict.ok());
  Status s = (*strict)->Next().status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr(path + ": offset " + std::to_string(off[3]) + ": data CRC mismatch"));
  EXPECT_EQ((*strict)->Next().status().code(), StatusCode::kDataLoss);  // stays failed

  opts["skip_corrupt"] = "true";
  for (const char* prefetch : {"0", "2"}) {
    opts["prefetch"] = prefetch;
    auto src = Make(opts);
    ASSERT_TRUE(src.ok());
    std::vector<Batch> batches;
    std::vector<std::string> ids = Drain(**src, &batches);
    std::vector<std::string> want;
    for (int v = 0; v < 20; ++v)
      if (v != 3 && v != 4 && v != 9) want.push_back(MakeSyntheticVideo(o, v).id);
    EXPECT_EQ(ids, want);
    ASSERT_EQ(batches.size(), 3u);
    EXPECT_EQ(batches[0].size(), 8);  // refilled: 0-2, 5-8, 10
    EXPECT_EQ(batches[1].size(), 8);
    EXPECT_EQ(batches[2].size(), 1);
    EXPECT_EQ((*src)->stats().skipped_corrupt, 3);
    EXPECT_EQ((*src)->stats().records, 17);
    ExpectBatchesMatch(o, batches);

    // Resume after the first batch: the replay meets records 3 and 4 again and skips them.
    ASSERT_TRUE((*src)->StartEpoch(0).ok());
    ASSERT_TRUE((*src)->Next().ok());
    auto pos = (*src)->Position();
    ASSERT_TRUE(pos.ok());
    auto resumed = Make(opts);
    ASSERT_TRUE(resumed.ok());
    ASSERT_TRUE((*resumed)->Restore(*pos).ok());
    EXPECT_EQ(Drain(**resumed), std::vector<std::string>(want.begin() + 8, want.end()));
  }
}

TEST_F(SourceTest, BrokenLengthLosesTheRestOfThatFileOnly) {
  auto uris = Write(SmallSynth(dir_.path(), 20, 2));
  auto off = RecordOffsets(uris[0]);
  FlipByte(uris[0], off[6] + 1);  // length of record 6: records 6..9 of shard 0 are unreadable
  auto src = Make({{"files", dir_ / "*.tfrecord"}, {"skip_corrupt", "true"}});
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(Drain(**src).size(), 16u);
  EXPECT_EQ((*src)->stats().skipped_corrupt, 1);
  auto strict = Make({{"files", dir_ / "*.tfrecord"}, {"batch_size", "100"}});
  Status s = (*strict)->Next().status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr(uris[0] + ": offset " + std::to_string(off[6]) + ": length CRC"));
}

// A file of hand-made records: good ones from synth plus the given bad payloads.
std::string WriteMixed(const std::string& path, const SynthOptions& o,
                       const std::vector<std::string>& bad) {
  std::string bytes;
  for (int64_t v = 0; v < 4; ++v)
    recordio::AppendFramedRecord(MakeSyntheticVideo(o, v).payload, &bytes);
  for (const auto& p : bad) recordio::AppendFramedRecord(p, &bytes);
  recordio::AppendFramedRecord(MakeSyntheticVideo(o, 4).payload, &bytes);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST_F(SourceTest, GarbagePayloadAndWrongFrameSize) {
  SynthOptions o = SmallSynth(dir_.path(), 0, 1);
  SynthOptions wide = o;
  wide.rgb_dim = kRgb + 1;  // a frame with the wrong number of bytes
  std::string path = WriteMixed(dir_ / "mixed.tfrecord", o,
                                {"\x0a\x05garbage payload", MakeSyntheticVideo(wide, 77).payload});
  auto off = RecordOffsets(path);
  ASSERT_EQ(off.size(), 7u);
  auto src = Make({{"files", path}, {"batch_size", "10"}});
  ASSERT_TRUE(src.ok());
  Status s = (*src)->Next().status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path + ": offset " + std::to_string(off[4]) +
                                     " (record index 4): unparsable"));

  auto skip = Make({{"files", path}, {"skip_corrupt", "true"}});
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(Drain(**skip),
            (std::vector<std::string>{"v0000000", "v0000001", "v0000002", "v0000003", "v0000004"}));
  EXPECT_EQ((*skip)->stats().skipped_corrupt, 2);

  // Only the wrong-size frame.
  std::string path2 = WriteMixed(dir_ / "wide.tfrecord", o, {MakeSyntheticVideo(wide, 77).payload});
  auto off2 = RecordOffsets(path2);
  auto src2 = Make({{"files", path2}, {"batch_size", "10"}});
  s = (*src2)->Next().status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path2 + ": offset " + std::to_string(off2[4]) +
                                     " (record index 4): video 'v0000077': feature 'rgb' frame 0 "
                                     "has 17 bytes"));
}

// Video-level records whose float features hold a NaN or an infinity: a data error naming the
// file, the record and the value, and with skip_corrupt exactly that record skipped and counted.
TEST_F(SourceTest, NonFiniteFeatureNamesFileAndRecord) {
  SynthOptions o = SmallSynth(dir_.path(), 0, 1);
  o.level = Level::kVideo;
  std::vector<std::string> bad;
  for (const float v : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    reel::tf::Example ex;
    ASSERT_TRUE(
        ex.ParseFromString(MakeSyntheticVideo(o, 70 + static_cast<int>(bad.size())).payload));
    (*ex.mutable_features()->mutable_feature())["mean_audio"].mutable_float_list()->set_value(5, v);
    bad.push_back(ex.SerializeAsString());
  }
  const std::string path = WriteMixed(dir_ / "nan.tfrecord", o, bad);
  const auto off = RecordOffsets(path);
  ASSERT_EQ(off.size(), 7u);
  const std::map<std::string, std::string> video = {
      {"files", path}, {"level", "video"}, {"features", "mean_rgb:16,mean_audio:8"}};
  auto given = video;
  given.emplace("batch_size", "3");
  auto src = Make(given);
  ASSERT_TRUE(src.ok()) << src.status();
  Result<Batch> first = (*src)->Next();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->ids, (std::vector<std::string>{"v0000000", "v0000001", "v0000002"}));
  Status s = (*src)->Next().status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(path + ": offset " + std::to_string(off[4]) +
                                     " (record index 4): video 'v0000070': feature 'mean_audio' "
                                     "value 5 is NaN"));

  given = video;
  given.emplace("skip_corrupt", "true");
  auto skip = Make(given);
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_EQ(Drain(**skip),
            (std::vector<std::string>{"v0000000", "v0000001", "v0000002", "v0000003", "v0000004"}));
  EXPECT_EQ((*skip)->stats().skipped_corrupt, 2);
}

TEST_F(SourceTest, LabelOutOfRangeNamesVideoAndFile) {
  auto uris = Write(SmallSynth(dir_.path(), 12, 1));
  auto options = ParseOptions(TfRecordSourceSchema(), {{"files", uris[0]},
                                                       {"features", "rgb:16,audio:8"},
                                                       {"num_classes", "3"},
                                                       {"skip_corrupt", "true"},
                                                       {"batch_size", "12"}});
  ASSERT_TRUE(options.ok());
  auto src = CreateTfRecordSource(*options, {{0, 1}, 0, &resolver_});
  ASSERT_TRUE(src.ok());
  Status s = (*src)->Next().status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;  // a config mismatch: never skipped
  EXPECT_THAT(s.message(), HasSubstr(uris[0] + ": offset "));
  EXPECT_THAT(s.message(), HasSubstr("video 'v00000"));
  EXPECT_THAT(s.message(), HasSubstr("outside [0, 3)"));
}

TEST_F(SourceTest, EmptyFileIsAnEmptyEpoch) {
  std::ofstream(dir_ / "empty.tfrecord").close();
  auto src = Make({{"files", dir_ / "empty.tfrecord"}});
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->Next().status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace reel::tfrecord
