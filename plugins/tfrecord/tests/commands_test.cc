// `reel synth` and `reel inspect`, run directly as Command components.
#include "commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "example.pb.h"
#include "local_storage.h"
#include "reel/recordio.h"
#include "test_util.h"
#include "yt8m.h"

namespace reel::tfrecord {
namespace {

using ::testing::HasSubstr;

class CommandsTest : public ::testing::Test {
 protected:
  Status Run(Command& cmd, const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    CommandContext ctx{&resolver_, &out_, &err_};
    return cmd.Run(args, ctx);
  }
  reel::testing::LocalResolver resolver_;
  reel::testing::TempDir dir_;
  std::ostringstream out_, err_;
};

TEST_F(CommandsTest, SynthThenInspectJson) {
  auto synth = MakeSynthCommand();
  Status s =
      Run(*synth, {"--out", dir_.path(), "--videos", "9", "--classes", "5", "--level", "frame",
                   "--shards", "2", "--seed", "3", "--min-frames", "4", "--max-frames", "6"});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(out_.str(), HasSubstr("wrote 9 frame-level videos"));
  auto inspect = MakeInspectCommand();
  s = Run(*inspect, {dir_ / "train*.tfrecord", "--json"});
  ASSERT_TRUE(s.ok()) << s;
  std::istringstream lines(out_.str());
  std::string line;
  int n = 0;
  const std::regex re(
      R"(\{"file":"[^"]*train000[01]\.tfrecord","offset":\d+,"id":"v000000\d","labels":\[[0-4](,[0-4])*\],"features":\{\},"feature_lists":\{("rgb"|"audio"):\{"frames":[4-6],"length":(1024|128)\},("rgb"|"audio"):\{"frames":[4-6],"length":(1024|128)\}\}\})");
  while (std::getline(lines, line)) {
    EXPECT_TRUE(std::regex_match(line, re)) << line;
    ++n;
  }
  EXPECT_EQ(n, 9);
  s = Run(*inspect, {dir_ / "train0000.tfrecord", "--json", "--limit", "2"});
  ASSERT_TRUE(s.ok());
  const std::string text = out_.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
}

TEST_F(CommandsTest, InspectRealShardText) {
  auto inspect = MakeInspectCommand();
  std::string shard = std::string(REEL_DATA_DIR) + "/yt8m/validate0000.tfrecord";
  Status s = Run(*inspect, {shard, "--limit", "1"});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(out_.str(), HasSubstr("#0 @0 id=02aa labels=[3,4,9,34] "));
  EXPECT_THAT(out_.str(), HasSubstr("mean_rgb:f[1024]"));
  EXPECT_THAT(out_.str(), HasSubstr("mean_audio:f[128]"));
  EXPECT_THAT(out_.str(), HasSubstr("validate0000.tfrecord: 284 record(s), 1338030 bytes (none)"));
}

TEST_F(CommandsTest, InspectReportsTheFirstError) {
  std::string bytes;
  recordio::AppendFramedRecord("not a proto \xff\xff", &bytes);
  std::string good;
  reel::tf::Example ex;
  (*ex.mutable_features()->mutable_feature())["id"].mutable_bytes_list()->add_value("ok1");
  recordio::AppendFramedRecord(ex.SerializeAsString(), &good);
  std::string path = dir_ / "bad.tfrecord";
  std::string cut = good + good.substr(0, 7);
  std::ofstream(path, std::ios::binary) << cut;
  auto inspect = MakeInspectCommand();
  Status s = Run(*inspect, {path});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(out_.str(), HasSubstr("id=ok1"));
  EXPECT_THAT(out_.str(), HasSubstr("1 record(s)"));
  EXPECT_THAT(out_.str(), HasSubstr("first error: DATA_LOSS: " + path + ": offset " +
                                    std::to_string(good.size()) + ": truncated record header"));
  std::ofstream(path, std::ios::binary) << bytes;
  s = Run(*inspect, {path, "--json"});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path + ": offset 0: unparsable"));
  // With several files, the first error is returned and later ones are printed.
  s = Run(*inspect, {path, dir_ / "none*.tfrecord", "--json"});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(err_.str(), HasSubstr("no file matches"));
  EXPECT_EQ(Run(*inspect, {dir_ / "none*.tfrecord"}).code(), StatusCode::kNotFound);
  EXPECT_EQ(Run(*inspect, {}).code(), StatusCode::kInvalidArgument);
}

// With --split, even classes show only in rgb and odd classes only in audio: with no noise, a
// video whose classes are all even has a flat audio mean and a patterned rgb mean.
TEST_F(CommandsTest, SynthSplitPutsClassesInOneStream) {
  auto synth = MakeSynthCommand();
  Status s =
      Run(*synth, {"--out", dir_.path(), "--videos", "40", "--classes", "6", "--level", "video",
                   "--shards", "1", "--split", "--noise", "0", "--max-labels", "1"});
  ASSERT_TRUE(s.ok()) << s;
  reel::testing::LocalStorage storage;
  auto file = storage.OpenRead(dir_ / "train0000.tfrecord");
  ASSERT_TRUE(file.ok());
  recordio::RecordReader reader(file->get());
  std::string payload;
  int seen_even = 0, seen_odd = 0;
  auto spread = [](const reel::tf::FloatList& l) {
    auto [lo, hi] = std::minmax_element(l.value().begin(), l.value().end());
    return *hi - *lo;
  };
  while (reader.ReadRecord(&payload).ok()) {
    reel::tf::Example ex;
    ASSERT_TRUE(ex.ParseFromString(payload));
    const auto& f = ex.features().feature();
    ASSERT_EQ(f.at("labels").int64_list().value_size(), 1);
    int64_t c = f.at("labels").int64_list().value(0);
    float rgb = spread(f.at("mean_rgb").float_list());
    float audio = spread(f.at("mean_audio").float_list());
    if (c % 2 == 0) {
      ++seen_even;
      EXPECT_GT(rgb, 0.5f) << "class " << c;
      EXPECT_EQ(audio, 0.0f) << "class " << c;
    } else {
      ++seen_odd;
      EXPECT_EQ(rgb, 0.0f) << "class " << c;
      EXPECT_GT(audio, 0.5f) << "class " << c;
    }
  }
  EXPECT_GT(seen_even, 0);
  EXPECT_GT(seen_odd, 0);
}

// The planted signal is learnable: a nearest-class-pattern rule on the video-level means finds
// the single label of nearly every video even with strong noise.
TEST_F(CommandsTest, SynthSignalIsRecoverable) {
  auto synth = MakeSynthCommand();
  ASSERT_TRUE(Run(*synth, {"--out", dir_.path(), "--videos", "60", "--classes", "4", "--level",
                           "video", "--shards", "1", "--max-labels", "1", "--noise", "1.5"})
                  .ok());
  reel::testing::LocalStorage storage;
  auto file = storage.OpenRead(dir_ / "train0000.tfrecord");
  recordio::RecordReader reader(file->get());
  std::string payload;
  std::vector<std::pair<int64_t, std::vector<float>>> videos;
  while (reader.ReadRecord(&payload).ok()) {
    reel::tf::Example ex;
    ASSERT_TRUE(ex.ParseFromString(payload));
    const auto& f = ex.features().feature();
    const auto& v = f.at("mean_rgb").float_list().value();
    videos.push_back({f.at("labels").int64_list().value(0), {v.begin(), v.end()}});
  }
  ASSERT_EQ(videos.size(), 60u);
  // Class centroids from the first half, scored on the second half.
  std::vector<std::vector<double>> centroid(4, std::vector<double>(1024, 0.0));
  std::vector<int> count(4, 0);
  for (size_t i = 0; i < 30; ++i) {
    ++count[videos[i].first];
    for (int d = 0; d < 1024; ++d) centroid[videos[i].first][d] += videos[i].second[d];
  }
  int correct = 0;
  for (size_t i = 30; i < 60; ++i) {
    int best = -1;
    double best_score = -1e30;
    for (int c = 0; c < 4; ++c) {
      if (count[c] == 0) continue;
      double dot = 0;
      for (int d = 0; d < 1024; ++d) dot += centroid[c][d] / count[c] * videos[i].second[d];
      if (dot > best_score) best_score = dot, best = c;
    }
    correct += best == videos[i].first;
  }
  EXPECT_GE(correct, 27);
}

// video-level means of every record in `path`, by id, with the first label.
std::map<std::string, std::pair<int64_t, std::vector<float>>> MeanRgbById(const std::string& path) {
  std::map<std::string, std::pair<int64_t, std::vector<float>>> out;
  reel::testing::LocalStorage storage;
  auto file = storage.OpenRead(path);
  EXPECT_TRUE(file.ok()) << path;
  if (!file.ok()) return out;
  recordio::RecordReader reader(file->get());
  std::string payload;
  while (reader.ReadRecord(&payload).ok()) {
    reel::tf::Example ex;
    EXPECT_TRUE(ex.ParseFromString(payload));
    const auto& f = ex.features().feature();
    const auto& v = f.at("mean_rgb").float_list().value();
    out[f.at("id").bytes_list().value(0)] = {f.at("labels").int64_list().value(0),
                                             {v.begin(), v.end()}};
  }
  return out;
}

// --test-videos: train/ and test/ hold other videos (other ids) of the same planted signal, so
// class centroids of train/ label test/ well above chance (1 in 4).
TEST_F(CommandsTest, SynthTestVideosAreAHeldOutSplitOfTheSameSignal) {
  auto synth = MakeSynthCommand();
  Status s =
      Run(*synth, {"--out", dir_.path(), "--videos", "40", "--test-videos", "40", "--classes", "4",
                   "--level", "video", "--shards", "1", "--max-labels", "1", "--noise", "1.5"});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(out_.str(), HasSubstr("wrote 40 training and 40 held-out video-level videos"));
  const auto train = MeanRgbById(dir_ / "train/train0000.tfrecord");
  const auto test = MeanRgbById(dir_ / "test/test0000.tfrecord");
  ASSERT_EQ(train.size(), 40u);
  ASSERT_EQ(test.size(), 40u);
  std::vector<std::vector<double>> centroid(4, std::vector<double>(1024, 0.0));
  for (const auto& [id, video] : train)
    for (int d = 0; d < 1024; ++d) centroid[video.first][d] += video.second[d];
  int correct = 0;
  for (const auto& [id, video] : test) {
    EXPECT_EQ(train.count(id), 0u) << id << " is in train/ and test/";
    int best = 0;
    double best_score = -1e30;
    for (int c = 0; c < 4; ++c) {
      double dot = 0;
      for (int d = 0; d < 1024; ++d) dot += centroid[c][d] * video.second[d];
      if (dot > best_score) best_score = dot, best = c;
    }
    correct += best == video.first;
  }
  EXPECT_GE(correct, 36);
  // Nothing beside train/ and test/.
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
    entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"test", "train"}));
}

TEST_F(CommandsTest, SynthRejectsBadFlags) {
  auto synth = MakeSynthCommand();
  EXPECT_EQ(Run(*synth, {"--videos", "3"}).code(), StatusCode::kInvalidArgument);  // no --out
  EXPECT_EQ(Run(*synth, {"--out", dir_.path(), "--videos", "x"}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Run(*synth, {"--out", dir_.path(), "--level", "clip"}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Run(*synth, {"--out", dir_.path(), "--bogus", "1"}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Run(*synth, {"--out", dir_.path(), "--shards", "0"}).code(),
            StatusCode::kInvalidArgument);
  Status s = Run(*synth, {"--out", dir_.path(), "--test-videos", "-1"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--test-videos must be >= 0"));
  EXPECT_FALSE(synth->Usage().empty());
}

}  // namespace
}  // namespace reel::tfrecord
