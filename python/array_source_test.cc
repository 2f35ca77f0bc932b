// The data source "numpy" (array_source.h): batches padded as the tfrecord source pads them,
// truncation at max_frames, labels checked against num_classes, streams, and tables kept alive by
// the sources that read them after they are dropped.
#include "array_source.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace reel::python {
namespace {

// Videos of 3, 1 and 2 frames of one feature "rgb" of width 2 (frame f of video v is v*10 + f,
// twice), labels {1}, {}, {0, 2}.
struct Videos {
  std::vector<float> values = {0, 0, 1, 1, 2, 2, 10, 10, 20, 20, 21, 21};
  ArrayTable Table(std::shared_ptr<const void> keep = nullptr) const {
    ArrayTable t;
    t.rows = 3;
    ArrayFeature f;
    f.name = "rgb";
    f.width = 2;
    f.frames = {values.data(), values.data() + 6, values.data() + 8};
    f.lengths = {3, 1, 2};
    t.features.push_back(f);
    t.label_offsets = {0, 1, 1, 3};
    t.label_ids = {1, 0, 2};
    t.keep = std::move(keep);
    return t;
  }
};

class ArraySourceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(RegisterArraySource(registry_).ok()); }
  Result<core::Owned<DataSource>> Open(int64_t handle, std::map<std::string, std::string> more = {},
                                       ShardSpec shard = {}) {
    more["table"] = std::to_string(handle);
    if (!more.count("shuffle")) more["shuffle"] = "false";
    return registry_.CreateDataSource("numpy", more, DataSourceContext{shard, 1, nullptr});
  }
  core::Registry registry_;
  Videos videos_;
};

TEST_F(ArraySourceTest, PadsToTheLongestVideoOfTheBatchWithZeros) {
  const int64_t h = AddArrayTable(videos_.Table());
  auto source = Open(h, {{"batch_size", "2"}});
  ASSERT_TRUE(source.ok()) << source.status().message();
  Result<Batch> b = (*source)->Next();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->ids, (std::vector<std::string>{"r0", "r1"}));
  const Feature& f = b->features.at("rgb");
  EXPECT_EQ(f.values.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(f.lengths, (std::vector<int32_t>{3, 1}));
  const std::vector<float> want = {0, 0, 1, 1, 2, 2, 10, 10, 0, 0, 0, 0};
  EXPECT_EQ(std::vector<float>(f.values.data(), f.values.data() + 12), want);
  EXPECT_EQ(b->label_offsets, (std::vector<int64_t>{0, 1, 1}));
  Result<Batch> last = (*source)->Next();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->features.at("rgb").values.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(last->label_ids, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ((*source)->Next().status().code(), StatusCode::kOutOfRange);
  DropArrayTable(h);
}

TEST_F(ArraySourceTest, TruncatesAtMaxFramesOrPadsToIt) {
  const int64_t h = AddArrayTable(videos_.Table());
  auto cut = Open(h, {{"batch_size", "3"}, {"max_frames", "2"}});
  ASSERT_TRUE(cut.ok());
  Result<Batch> b = (*cut)->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->features.at("rgb").values.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(b->features.at("rgb").lengths, (std::vector<int32_t>{2, 1, 2}));
  auto fixed = Open(h, {{"batch_size", "3"}, {"max_frames", "5"}, {"fixed_length", "true"}});
  ASSERT_TRUE(fixed.ok());
  b = (*fixed)->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->features.at("rgb").values.shape(), (Shape{3, 5, 2}));
  DropArrayTable(h);
}

TEST_F(ArraySourceTest, LabelOutsideNumClassesNamesTheVideo) {
  const int64_t h = AddArrayTable(videos_.Table());
  auto source = Open(h, {{"batch_size", "3"}, {"num_classes", "2"}});
  ASSERT_TRUE(source.ok());
  Result<Batch> b = (*source)->Next();
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), "labels: video 2 has label 2 outside [0, 2)");
  DropArrayTable(h);
}

TEST_F(ArraySourceTest, ValidateNamesWhatIsWrong) {
  ArrayTable t = videos_.Table();
  EXPECT_TRUE(ValidateArrayTable(t).ok());
  t.features[0].lengths[1] = 0;
  EXPECT_EQ(ValidateArrayTable(t).message(), "feature 'rgb': video 1 has no frame");
  t = videos_.Table();
  t.label_offsets = {0, 1, 3};
  EXPECT_EQ(ValidateArrayTable(t).message(), "labels: offsets do not match 3 videos and 3 labels");
  t = videos_.Table();
  t.label_ids[0] = -1;
  EXPECT_EQ(ValidateArrayTable(t).message(), "labels: video 0 has label -1");
}

TEST_F(ArraySourceTest, ASourceKeepsItsTableAfterTheDropAndReleasesItAfter) {
  auto owner = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owner;
  const int64_t before = ArrayTableCount();
  const int64_t h = AddArrayTable(videos_.Table(owner));
  owner.reset();
  EXPECT_EQ(ArrayTableCount(), before + 1);
  {
    auto source = Open(h);
    ASSERT_TRUE(source.ok());
    DropArrayTable(h);
    EXPECT_EQ(ArrayTableCount(), before);
    EXPECT_FALSE(watch.expired());
    EXPECT_TRUE((*source)->Next().ok());
  }
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(Open(h).status().code(), StatusCode::kNotFound);
}

TEST_F(ArraySourceTest, StreamGivesItsBatchesAndResumesWhereItWas) {
  std::vector<std::pair<int64_t, int64_t>> asked;
  const int64_t h = AddArrayStream([&](int64_t epoch, int64_t index) -> Result<ArrayTable> {
    asked.emplace_back(epoch, index);
    if (index >= 2) return OutOfRangeError("end");
    return videos_.Table();
  });
  auto source = Open(h);
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE((*source)->Next().ok());
  Result<std::string> pos = (*source)->Position();
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ(*pos, "numpy/v2 stream epoch=0 next=1");
  Result<Batch> b = (*source)->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->size(), 3);
  EXPECT_EQ((*source)->Next().status().code(), StatusCode::kOutOfRange);
  auto again = Open(h);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Restore(*pos).ok());
  ASSERT_TRUE((*again)->Next().ok());
  EXPECT_EQ(asked.back(), (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(Open(h, {}, ShardSpec{0, 2}).status().code(), StatusCode::kUnimplemented);
  DropArrayTable(h);
}

TEST_F(ArraySourceTest, ATableOfAsManyVideosRestoresAPosition) {
  const int64_t first = AddArrayTable(videos_.Table());
  auto source = Open(first, {{"batch_size", "2"}});
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE((*source)->Next().ok());
  Result<std::string> pos = (*source)->Position();
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ(*pos, "numpy/v2 videos=3 epoch=0 next=2");
  const int64_t second = AddArrayTable(videos_.Table());  // as a resumed call registers it
  auto resumed = Open(second, {{"batch_size", "2"}});
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE((*resumed)->Restore(*pos).ok());
  Result<Batch> b = (*resumed)->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ids, (std::vector<std::string>{"r2"}));
  ArrayTable fewer = videos_.Table();
  fewer.rows = 2;
  fewer.features[0].frames.pop_back();
  fewer.features[0].lengths.pop_back();
  fewer.label_offsets.pop_back();
  fewer.label_ids.resize(1);
  const int64_t third = AddArrayTable(std::move(fewer));
  auto other = Open(third);
  ASSERT_TRUE(other.ok());
  const Status refused = (*other)->Restore(*pos);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "not a position of this in-memory data (videos=2): '" + *pos + "'");
  EXPECT_EQ((*other)->Restore("numpy/v2 videos=2 epoch=x next=0").code(),
            StatusCode::kInvalidArgument);
  for (int64_t h : {first, second, third}) DropArrayTable(h);
}

}  // namespace
}  // namespace reel::python
