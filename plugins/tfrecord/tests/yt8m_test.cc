// YouTube-8M decoding: the real shards, frame-level SequenceExamples, bad payloads, dequantization.
#include "yt8m.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "example.pb.h"
#include "local_storage.h"
#include "reel/recordio.h"
#include "test_util.h"

namespace reel::tfrecord {
namespace {

using ::testing::HasSubstr;

const std::string kShards = std::string(REEL_DATA_DIR) + "/yt8m/";

DecodeConfig VideoConfig() {
  DecodeConfig c;
  c.level = Level::kVideo;
  c.features = DefaultFeatureSpecs(Level::kVideo);
  return c;
}

TEST(RealShardsTest, CountsFirstRecordAndAgreementWithProtobuf) {
  reel::testing::LocalStorage storage;
  const std::pair<const char*, int> shards[] = {{"validate0000.tfrecord", 284},
                                                {"validate0001.tfrecord", 305},
                                                {"validate0002.tfrecord", 313}};
  VideoRecord rec;
  for (const auto& [name, count] : shards) {
    auto file = storage.OpenRead(kShards + name);
    ASSERT_TRUE(file.ok()) << file.status();
    recordio::RecordReader reader(file->get());
    std::string payload;
    int n = 0;
    Status s;
    while ((s = reader.ReadRecord(&payload)).ok()) {
      ASSERT_TRUE(DecodeVideo(payload, VideoConfig(), &rec).ok()) << name << " record " << n;
      // Independent check: protobuf's full parser over our wire-compatible proto.
      reel::tf::Example ex;
      ASSERT_TRUE(ex.ParseFromString(payload));
      const auto& f = ex.features().feature();
      ASSERT_EQ(rec.id, f.at("id").bytes_list().value(0));
      ASSERT_EQ(rec.labels.size(), static_cast<size_t>(f.at("labels").int64_list().value_size()));
      for (size_t i = 0; i < rec.labels.size(); ++i)
        ASSERT_EQ(rec.labels[i], f.at("labels").int64_list().value(static_cast<int>(i)));
      std::vector<float> mean_rgb(1024);
      WriteFeature(rec, 0, 1024, Level::kVideo, mean_rgb.data());
      for (int i = 0; i < 1024; ++i) ASSERT_EQ(mean_rgb[i], f.at("mean_rgb").float_list().value(i));
      if (n == 0 && std::string(name) == "validate0000.tfrecord") {
        EXPECT_EQ(payload.size(), 4695u);
        EXPECT_EQ(rec.id, "02aa");
        EXPECT_EQ(rec.labels, (std::vector<int32_t>{3, 4, 9, 34}));
        EXPECT_EQ(rec.length(0), 1);
        EXPECT_EQ(f.at("mean_rgb").float_list().value_size(), 1024);
        EXPECT_EQ(f.at("mean_audio").float_list().value_size(), 128);
      }
      ++n;
    }
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s;
    EXPECT_EQ(n, count) << name;
  }
}

// A frame-level record built with protobuf messages.
std::string FrameRecord(const std::string& id, std::vector<int64_t> labels, int frames, int rgb_dim,
                        int audio_dim, int bad_frame = -1) {
  reel::tf::SequenceExample se;
  auto& ctx = *se.mutable_context()->mutable_feature();
  ctx["id"].mutable_bytes_list()->add_value(id);
  for (int64_t c : labels) ctx["labels"].mutable_int64_list()->add_value(c);
  ctx["extra"].mutable_float_list()->add_value(1.5f);  // unknown key: skipped
  auto& lists = *se.mutable_feature_lists()->mutable_feature_list();
  for (int t = 0; t < frames; ++t) {
    std::string rgb(static_cast<size_t>(rgb_dim + (t == bad_frame ? -1 : 0)), '\0');
    for (size_t d = 0; d < rgb.size(); ++d) rgb[d] = static_cast<char>((t * 31 + d * 7) & 255);
    lists["rgb"].add_feature()->mutable_bytes_list()->add_value(rgb);
    lists["audio"].add_feature()->mutable_bytes_list()->add_value(
        std::string(static_cast<size_t>(audio_dim), static_cast<char>(t)));
  }
  return se.SerializeAsString();
}

DecodeConfig FrameConfig(int64_t max_frames = 300) {
  DecodeConfig c;
  c.features = {{"rgb", 16}, {"audio", 4}};
  c.num_classes = 10;
  c.max_frames = max_frames;
  return c;
}

TEST(FrameLevelTest, DecodesDequantizesAndTruncates) {
  std::string payload = FrameRecord("vid", {1, 7}, 5, 16, 4);
  VideoRecord rec;
  ASSERT_TRUE(DecodeVideo(payload, FrameConfig(), &rec).ok());
  EXPECT_EQ(rec.id, "vid");
  EXPECT_EQ(rec.labels, (std::vector<int32_t>{1, 7}));
  EXPECT_EQ(rec.length(0), 5);
  EXPECT_EQ(rec.length(1), 5);
  std::vector<float> rgb(5 * 16);
  WriteFeature(rec, 0, 16, Level::kFrame, rgb.data());
  for (int t = 0; t < 5; ++t)
    for (int d = 0; d < 16; ++d) {
      double q = (t * 31 + d * 7) & 255;
      EXPECT_NEAR(rgb[t * 16 + d], q * 4.0 / 255.0 + 4.0 / 512.0 - 2.0, 1e-6);
    }
  ASSERT_TRUE(DecodeVideo(payload, FrameConfig(3), &rec).ok());
  EXPECT_EQ(rec.length(0), 3);
  EXPECT_EQ(rec.features[0].total_frames, 5);
}

TEST(FrameLevelTest, UnknownAndEmptyFieldsAreSkipped) {
  std::string payload = FrameRecord("vid", {2}, 2, 16, 4);
  payload += std::string("\x38\x05", 2);  // field 7, varint 5
  payload += std::string("\x4a\x00", 2);  // field 9, empty bytes
  payload += std::string("\x12\x00", 2);  // an empty field 2, as the real shards have
  VideoRecord rec;
  Status s = DecodeVideo(payload, FrameConfig(), &rec);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rec.length(0), 2);
}

// Frames usually take a fast path (each a Feature holding exactly one bytes value); one encoded
// any other valid way, here with an unknown field, sends the list to the general decoder, which
// must give the same frames.
TEST(FrameLevelTest, FramesOutsideTheFastPathDecodeTheSame) {
  reel::tf::SequenceExample se;
  ASSERT_TRUE(se.ParseFromString(FrameRecord("vid", {1}, 4, 16, 4)));
  auto* frame = se.mutable_feature_lists()->mutable_feature_list()->at("rgb").mutable_feature(2);
  frame->GetReflection()->MutableUnknownFields(frame)->AddVarint(7, 5);
  const std::string simple = FrameRecord("vid", {1}, 4, 16, 4);
  const std::string other = se.SerializeAsString();  // records view into their payloads
  VideoRecord fast, general;
  ASSERT_TRUE(DecodeVideo(simple, FrameConfig(), &fast).ok());
  Status s = DecodeVideo(other, FrameConfig(), &general);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(general.length(0), 4);
  std::vector<float> a(4 * 16), b(4 * 16);
  WriteFeature(fast, 0, 16, Level::kFrame, a.data());
  WriteFeature(general, 0, 16, Level::kFrame, b.data());
  EXPECT_EQ(a, b);
}

TEST(FrameLevelTest, FrameWithWrongByteCount) {
  VideoRecord rec;
  Status s = DecodeVideo(FrameRecord("vid9", {1}, 4, 16, 4, /*bad_frame=*/2), FrameConfig(), &rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("video 'vid9'"));
  EXPECT_THAT(s.message(), HasSubstr("feature 'rgb' frame 2 has 15 bytes"));
}

TEST(FrameLevelTest, LabelOutOfRange) {
  VideoRecord rec;
  for (int64_t bad : {10, -1}) {
    Status s = DecodeVideo(FrameRecord("vidL", {1, bad}, 2, 16, 4), FrameConfig(), &rec);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("video 'vidL' has label " + std::to_string(bad)));
    EXPECT_THAT(s.message(), HasSubstr("num_classes"));
  }
}

TEST(FrameLevelTest, GarbageAndMissingPieces) {
  VideoRecord rec;
  std::string garbage = "\x0a\xff\xff\xff\xff\x0f garbage that claims a huge field";
  Status s = DecodeVideo(garbage, FrameConfig(), &rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("unparsable"));

  std::string truncated = FrameRecord("vid", {1}, 3, 16, 4);
  truncated.resize(truncated.size() - 5);
  EXPECT_EQ(DecodeVideo(truncated, FrameConfig(), &rec).code(), StatusCode::kDataLoss);

  DecodeConfig other_key = FrameConfig();
  other_key.id_key = "video_id";
  s = DecodeVideo(FrameRecord("vid", {1}, 3, 16, 4), other_key, &rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("no feature 'video_id'"));

  DecodeConfig missing = FrameConfig();
  missing.features.push_back({"depth", 8});
  s = DecodeVideo(FrameRecord("vidM", {1}, 3, 16, 4), missing, &rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("video 'vidM' has no feature list 'depth'"));

  s = DecodeVideo(FrameRecord("vid0", {1}, 0, 16, 4), FrameConfig(), &rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);

  // A video-level record read as frame level (and the reverse) names what is missing.
  reel::tf::Example ex;
  (*ex.mutable_features()->mutable_feature())["id"].mutable_bytes_list()->add_value("x");
  s = DecodeVideo(ex.SerializeAsString(), FrameConfig(), &rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("no feature list 'rgb'"));
}

TEST(VideoLevelTest, WrongFloatCount) {
  reel::tf::Example ex;
  auto& f = *ex.mutable_features()->mutable_feature();
  f["id"].mutable_bytes_list()->add_value("short");
  for (int i = 0; i < 1000; ++i) f["mean_rgb"].mutable_float_list()->add_value(0.5f);
  for (int i = 0; i < 128; ++i) f["mean_audio"].mutable_float_list()->add_value(0.5f);
  VideoRecord rec;
  Status s = DecodeVideo(ex.SerializeAsString(), VideoConfig(), &rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr("video 'short': feature 'mean_rgb' has 1000 floats, want 1024"));
}

// Protobuf wire bytes by hand, for lists that protobuf's own serializer never writes.
std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>(v | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}
std::string LengthDelimited(int field, const std::string& payload) {
  return Varint(static_cast<uint64_t>(field) << 3 | 2) + Varint(payload.size()) + payload;
}
std::string FloatRun(int n, float value) {
  std::string run(static_cast<size_t>(n) * 4, '\0');
  for (int i = 0; i < n; ++i) std::memcpy(run.data() + 4 * i, &value, 4);
  return LengthDelimited(1, run);
}
std::string FeatureEntry(const std::string& key, const std::string& feature) {
  return LengthDelimited(1, LengthDelimited(1, key) + LengthDelimited(2, feature));
}

// Found by the yt8m_decode fuzzer: a FloatList whose packed values come in several runs, some
// empty. An empty run after the first copied zero bytes from a null pointer into an empty vector
// (undefined behaviour that UBSan stops on). Empty runs add nothing; the values are the others'.
TEST(VideoLevelTest, EmptyPackedRunsAddNothing) {
  const std::string rgb = FloatRun(0, 0) + FloatRun(0, 0) + FloatRun(1024, 0.25f);
  const std::string features =
      FeatureEntry("id", LengthDelimited(1, LengthDelimited(1, "runs"))) +
      FeatureEntry("mean_rgb", LengthDelimited(2, rgb)) +
      FeatureEntry("mean_audio", LengthDelimited(2, FloatRun(0, 0) + FloatRun(128, 0.5f)));
  const std::string payload = LengthDelimited(1, features);  // the record points into it
  VideoRecord rec;
  ASSERT_TRUE(DecodeVideo(payload, VideoConfig(), &rec).ok());
  std::vector<float> rgb_out(1024), audio_out(128);
  WriteFeature(rec, 0, 1024, Level::kVideo, rgb_out.data());
  WriteFeature(rec, 1, 128, Level::kVideo, audio_out.data());
  EXPECT_THAT(rgb_out, ::testing::Each(0.25f));
  EXPECT_THAT(audio_out, ::testing::Each(0.5f));

  // Only empty runs: no floats, a clear error.
  const std::string empty =
      FeatureEntry("mean_rgb", LengthDelimited(2, FloatRun(0, 0) + FloatRun(0, 0)));
  Status s = DecodeVideo(
      LengthDelimited(1, FeatureEntry("id", LengthDelimited(1, LengthDelimited(1, "none"))) +
                             empty +
                             FeatureEntry("mean_audio", LengthDelimited(2, FloatRun(128, 0.5f)))),
      VideoConfig(), &rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("feature 'mean_rgb' has 0 floats, want 1024"));
}

// A NaN or an infinity in a float list is a data error naming the video, the feature and the
// value, however the list is written: one packed run, several runs, or value by value.
TEST(VideoLevelTest, NonFiniteFloatsAreDataLoss) {
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    std::string one(128 * 4, '\0'), fixed;
    for (int i = 0; i < 128; ++i) {
      const float v = i == 77 ? bad : 0.5f;
      std::memcpy(one.data() + 4 * i, &v, 4);
      fixed += static_cast<char>(1 << 3 | 5);  // field 1, fixed32
      fixed.append(reinterpret_cast<const char*>(&v), 4);
    }
    const std::string lists[] = {
        LengthDelimited(1, one),
        LengthDelimited(1, one.substr(0, 64 * 4)) + LengthDelimited(1, one.substr(64 * 4)), fixed};
    for (const std::string& audio : lists) {
      const std::string payload = LengthDelimited(
          1, FeatureEntry("id", LengthDelimited(1, LengthDelimited(1, "odd"))) +
                 FeatureEntry("mean_rgb", LengthDelimited(2, FloatRun(1024, 0.25f))) +
                 FeatureEntry("mean_audio", LengthDelimited(2, audio)));
      VideoRecord rec;
      Status s = DecodeVideo(payload, VideoConfig(), &rec);
      EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
      EXPECT_THAT(s.message(), HasSubstr("video 'odd': feature 'mean_audio' value 77 is " +
                                         std::string(std::isnan(bad) ? "NaN" : "infinite")));
    }
  }
  // The largest finite floats pass.
  VideoRecord rec;
  const std::string payload = LengthDelimited(
      1, FeatureEntry("id", LengthDelimited(1, LengthDelimited(1, "big"))) +
             FeatureEntry("mean_rgb",
                          LengthDelimited(2, FloatRun(1024, std::numeric_limits<float>::max()))) +
             FeatureEntry("mean_audio",
                          LengthDelimited(2, FloatRun(128, -std::numeric_limits<float>::max()))));
  EXPECT_TRUE(DecodeVideo(payload, VideoConfig(), &rec).ok());
}

TEST(DequantizeTest, FormulaVectorPathAndQuantizeRoundTrip) {
  std::vector<uint8_t> q(256 * 3 + 5);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(i * 13);
  std::vector<float> out(q.size());
  for (size_t start : {0, 1, 3}) {
    DequantizeBytes(q.data() + start, q.size() - start, out.data());
    for (size_t i = 0; i + start < q.size(); ++i) {
      ASSERT_EQ(out[i], Dequantize(q[i + start]));
      ASSERT_NEAR(out[i], q[i + start] * 4.0 / 255.0 + 4.0 / 512.0 - 2.0, 1e-6);
    }
  }
  for (int v = 0; v < 256; ++v) EXPECT_EQ(Quantize(static_cast<float>(v * 4.0 / 255.0 - 2.0)), v);
  EXPECT_EQ(Quantize(-7.0f), 0);
  EXPECT_EQ(Quantize(9.0f), 255);
  EXPECT_EQ(Quantize(std::nanf("")), 0);
  EXPECT_EQ(Quantize(-2.0f + 4.0f / 255.0f * 0.49f), 0);
  EXPECT_EQ(Quantize(-2.0f + 4.0f / 255.0f * 0.51f), 1);
}

TEST(FeatureSpecTest, ParsesAndRejects) {
  auto ok = ParseFeatureSpecs({"rgb:1024", "audio:128"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)[1].name, "audio");
  EXPECT_EQ((*ok)[1].dim, 128);
  for (const char* bad : {"rgb", "rgb:", ":3", "rgb:x", "rgb:0", "rgb:-4"}) {
    auto r = ParseFeatureSpecs({bad});
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(bad));
  }
  EXPECT_FALSE(ParseFeatureSpecs({"a:1", "a:2"}).ok());
}

}  // namespace
}  // namespace reel::tfrecord
