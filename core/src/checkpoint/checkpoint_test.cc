#include "reel/core/checkpoint.h"

#include <gtest/gtest.h>

#include "train/testing.h"

namespace reel::core {
namespace {

using testing::MemStorage;
using testing::TinyModel;

CheckpointState MakeState(ParamArena& arena, int64_t step) {
  CheckpointState s;
  s.model_name = "tiny";
  s.CaptureParams(arena);
  s.optimizer_state = "opt";
  s.step = step;
  s.epoch = 2;
  s.schedule_step = step;
  s.data_positions = {"p0", "p1"};
  s.data_epochs = {3, 4};
  s.data_steps = {40, 37};
  s.config_text = "trainer { steps: 10 }";
  s.seed = 7;
  s.examples_seen = 123;
  s.world_size = 2;
  return s;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(model_.DeclareParams(arena_).ok());
    arena_.Finalize();
    ASSERT_TRUE(model_.Initialize(3).ok());
  }
  ParamArena arena_;  // outlives the model
  TinyModel model_{4, 3};
  MemStorage storage_;
};

TEST_F(CheckpointTest, RoundTripsEveryField) {
  CheckpointState s = MakeState(arena_, 42);
  auto back = DecodeCheckpoint(EncodeCheckpoint(s), "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model_name, "tiny");
  EXPECT_EQ(back->step, 42);
  EXPECT_EQ(back->epoch, 2);
  EXPECT_EQ(back->schedule_step, 42);
  EXPECT_EQ(back->data_positions, s.data_positions);
  EXPECT_EQ(back->data_epochs, s.data_epochs);
  EXPECT_EQ(back->data_steps, s.data_steps);
  EXPECT_EQ(back->config_text, s.config_text);
  EXPECT_EQ(back->optimizer_state, "opt");
  EXPECT_EQ(back->seed, 7u);
  EXPECT_EQ(back->examples_seen, 123);
  EXPECT_EQ(back->world_size, 2);
  ASSERT_EQ(back->params.size(), 2u);
  EXPECT_EQ(back->params[0].name, "w");
  EXPECT_EQ(back->params[0].shape, (Shape{4, 3}));
  EXPECT_EQ(back->params[0].values, s.params[0].values);

  ParamArena other;
  TinyModel m2(4, 3);
  ASSERT_TRUE(m2.DeclareParams(other).ok());
  other.Finalize();
  ASSERT_TRUE(RestoreParams(*back, "tiny", other, "mem").ok());
  EXPECT_TRUE(std::equal(other.values().begin(), other.values().end(), arena_.values().begin()));
}

TEST_F(CheckpointTest, CorruptBytesAreDataLoss) {
  std::string bytes = EncodeCheckpoint(MakeState(arena_, 1));
  for (size_t at : {bytes.size() / 2, size_t{20}, bytes.size() - 8}) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    auto r = DecodeCheckpoint(bad, "ckpt-x");
    ASSERT_FALSE(r.ok()) << "flip at " << at;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("ckpt-x"), std::string::npos);
  }
  auto truncated = DecodeCheckpoint(bytes.substr(0, bytes.size() / 3), "ckpt-y");
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss);
}

// Found by tests/fuzz/checkpoint_fuzz: a shape whose element count overflows int64 (the fuzzer's
// [2295288530930926080, 48]) was multiplied out with undefined behaviour, and a shape with
// negative dimensions whose product matched the values ([-1, -4] with 4 floats) was accepted.
TEST_F(CheckpointTest, ShapesThatDoNotDescribeTheValuesAreDataLoss) {
  const Shape bad_shapes[] = {{2295288530930926080, 48}, {-1, -4}, {int64_t{1} << 62, 4, 0}};
  for (const Shape& shape : bad_shapes) {
    CheckpointState s;
    s.model_name = "tiny";
    s.params.push_back({"w", shape, std::vector<float>(4, 1.0f)});
    auto back = DecodeCheckpoint(EncodeCheckpoint(s), "mem://c");
    ASSERT_FALSE(back.ok()) << ShapeToString(shape);
    EXPECT_EQ(back.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(back.status().message().find("parameter 'w' has 16 bytes for shape"),
              std::string::npos)
        << back.status();
  }
}

// Found by checkpoint_fuzz: a block with a zero dimension has no values; decoding it copied
// from a null pointer (undefined behaviour, caught by UBSan in the sanitizer phase).
TEST_F(CheckpointTest, ABlockWithAZeroDimensionRoundTrips) {
  CheckpointState s;
  s.model_name = "tiny";
  s.params.push_back({"empty", Shape{0, 4}, {}});
  s.params.push_back({"w", Shape{2}, {1.0f, 2.0f}});
  auto back = DecodeCheckpoint(EncodeCheckpoint(s), "mem://c");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->params.size(), 2u);
  EXPECT_TRUE(back->params[0].values.empty());
  EXPECT_EQ(back->params[0].shape, (Shape{0, 4}));
  EXPECT_EQ(back->params[1].values, (std::vector<float>{1.0f, 2.0f}));
}

TEST_F(CheckpointTest, DifferentModelOrLayoutIsRefusedAndNothingWritten) {
  CheckpointState s = MakeState(arena_, 1);
  ParamArena other;
  TinyModel wider(5, 3);
  ASSERT_TRUE(wider.DeclareParams(other).ok());
  other.Finalize();
  std::vector<float> before(other.values().begin(), other.values().end());

  Status wrong_name = RestoreParams(s, "moe", other, "c1");
  EXPECT_EQ(wrong_name.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong_name.message().find("holds model 'tiny', not 'moe'"), std::string::npos);

  Status wrong_shape = RestoreParams(s, "tiny", other, "c1");
  EXPECT_EQ(wrong_shape.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong_shape.message().find("'w' [4, 3]"), std::string::npos) << wrong_shape;
  EXPECT_TRUE(std::equal(before.begin(), before.end(), other.values().begin()));
}

TEST_F(CheckpointTest, ManagerKeepsLastKAndFindsNewest) {
  CheckpointManager m(storage_, "run/ckpt", 2);
  for (int64_t step : {5, 10, 100, 20}) {
    auto uri = m.Save(MakeState(arena_, step));
    ASSERT_TRUE(uri.ok()) << uri.status();
  }
  auto list = m.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].first, 20);
  EXPECT_EQ((*list)[1].first, 100);
  std::string uri;
  auto newest = m.LoadNewest(&uri);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->step, 100);
  EXPECT_EQ(uri, "run/ckpt/" + CheckpointName(100));
  auto direct = LoadCheckpoint(storage_, "run/ckpt/" + CheckpointName(20));
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->step, 20);
  auto via_dir = LoadCheckpoint(storage_, "run/ckpt/");
  ASSERT_TRUE(via_dir.ok());
  EXPECT_EQ(via_dir->step, 100);
}

TEST_F(CheckpointTest, EmptyDirectoryIsNotFound) {
  auto r = LoadCheckpoint(storage_, "nowhere");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("nowhere"), std::string::npos);
}

TEST_F(CheckpointTest, CorruptNewestIsDataLossNamingTheFile) {
  CheckpointManager m(storage_, "d", 0);
  ASSERT_TRUE(m.Save(MakeState(arena_, 1)).ok());
  std::string uri = "d/" + CheckpointName(1);
  std::string bytes = storage_.objects()[uri];
  bytes[bytes.size() / 2] ^= 1;
  storage_.Put(uri, bytes);
  auto r = m.LoadNewest();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(uri), std::string::npos);
  EXPECT_EQ(storage_.objects()[uri], bytes);  // left as it was
}

}  // namespace
}  // namespace reel::core
