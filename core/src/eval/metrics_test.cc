#include "reel/core/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

namespace reel::core {
namespace {

// Three classes, top 2, three videos; every number below is worked out by hand in the comments.
//   A: scores [0.9, 0.5, 0.1], labels {0, 2}
//   B: scores [0.2, 0.8, 0.6], labels {2}
//   C: scores [0.7, 0.3, 0.2], labels {}
TEST(MetricsTest, HandComputedTwoVideos) {
  MetricsAccumulator acc(3, 2);
  ASSERT_TRUE(acc.AddVideo(std::vector<float>{0.9f, 0.5f, 0.1f}, std::vector<int32_t>{0, 2}).ok());
  ASSERT_TRUE(acc.AddVideo(std::vector<float>{0.2f, 0.8f, 0.6f}, std::vector<int32_t>{2}).ok());
  EvalMetrics m = acc.Compute();
  EXPECT_EQ(m.videos, 2);
  EXPECT_DOUBLE_EQ(m.hit_at_1, 0.5);  // A's best (0) is true, B's best (1) is not
  EXPECT_DOUBLE_EQ(m.perr, 0.25);     // A: top-2 {0,1} has 1 of 2; B: top-1 {1} has 0 of 1
  // Pooled top-2: 0.9T 0.8F 0.6T 0.5F; 3 positives in all: (1/1 + 2/3) / 3.
  EXPECT_DOUBLE_EQ(m.gap, (1.0 + 2.0 / 3.0) / 3.0);
  // Class 0: 0.9T, 1 positive -> 1. Class 2: 0.6T (A's 0.1 is outside A's top 2), 2 positives
  // -> 0.5. Class 1 has no positives and is left out.
  EXPECT_DOUBLE_EQ(m.map, 0.75);
}

TEST(MetricsTest, VideoWithoutLabelsCountsAsZero) {
  MetricsAccumulator acc(3, 2);
  ASSERT_TRUE(acc.AddVideo(std::vector<float>{0.9f, 0.5f, 0.1f}, std::vector<int32_t>{0, 2}).ok());
  ASSERT_TRUE(acc.AddVideo(std::vector<float>{0.2f, 0.8f, 0.6f}, std::vector<int32_t>{2}).ok());
  ASSERT_TRUE(acc.AddVideo(std::vector<float>{0.7f, 0.3f, 0.2f}, std::vector<int32_t>{}).ok());
  EvalMetrics m = acc.Compute();
  EXPECT_EQ(m.videos, 3);
  EXPECT_DOUBLE_EQ(m.hit_at_1, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.perr, 0.5 / 3.0);
  // Pooled: 0.9T 0.8F 0.7F 0.6T 0.5F 0.3F -> (1/1 + 2/4) / 3.
  EXPECT_DOUBLE_EQ(m.gap, 0.5);
  // Class 0: 0.9T 0.7F -> 1/1 over 1 positive. Class 2 unchanged.
  EXPECT_DOUBLE_EQ(m.map, 0.75);
}

TEST(MetricsTest, DuplicateLabelsCountOnce) {
  MetricsAccumulator acc(2, 20);  // k larger than the class count
  ASSERT_TRUE(acc.AddVideo(std::vector<float>{0.1f, 0.9f}, std::vector<int32_t>{1, 1}).ok());
  EvalMetrics m = acc.Compute();
  EXPECT_DOUBLE_EQ(m.gap, 1.0);
  EXPECT_DOUBLE_EQ(m.perr, 1.0);
  EXPECT_DOUBLE_EQ(m.hit_at_1, 1.0);
  EXPECT_DOUBLE_EQ(m.map, 1.0);
}

TEST(MetricsTest, RejectsBadInput) {
  MetricsAccumulator acc(3, 2);
  EXPECT_EQ(acc.AddVideo(std::vector<float>{0.1f}, std::vector<int32_t>{}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(acc.AddVideo(std::vector<float>{0.1f, 0.2f, 0.3f}, std::vector<int32_t>{3}).code(),
            StatusCode::kInvalidArgument);
  MetricsAccumulator other(4, 2);
  EXPECT_EQ(acc.Merge(other).code(), StatusCode::kInvalidArgument);
  auto bad = MetricsAccumulator::Deserialize("garbage");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  std::string good = acc.Serialize();
  EXPECT_FALSE(MetricsAccumulator::Deserialize(good.substr(0, good.size() - 1)).ok());
}

// ---- A straightforward reference over the full score matrix, written independently: O(P^2)
// precision counts instead of a sort-and-scan. Scores are distinct, so there are no ties.
struct Video {
  std::vector<float> scores;
  std::vector<int32_t> labels;
};

std::vector<int> TopK(const std::vector<float>& s, int k) {
  std::vector<int> idx(s.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return s[a] > s[b]; });
  idx.resize(std::min<size_t>(idx.size(), static_cast<size_t>(k)));
  return idx;
}

struct RefPair {
  float score;
  int cls;
  bool truth;
};

double RefAp(const std::vector<RefPair>& pairs, int64_t positives) {
  if (positives == 0) return 0.0;
  double sum = 0;
  for (const RefPair& p : pairs) {
    if (!p.truth) continue;
    int above = 0, true_above = 0;
    for (const RefPair& q : pairs)
      if (q.score >= p.score) {
        ++above;
        true_above += q.truth;
      }
    sum += static_cast<double>(true_above) / above;
  }
  return sum / static_cast<double>(positives);
}

EvalMetrics Reference(const std::vector<Video>& videos, int classes, int k) {
  EvalMetrics m;
  m.videos = static_cast<int64_t>(videos.size());
  std::vector<RefPair> pooled;
  std::vector<int64_t> positives(classes, 0);
  for (const Video& v : videos) {
    std::set<int> truth(v.labels.begin(), v.labels.end());
    for (int c : truth) ++positives[c];
    auto top1 = TopK(v.scores, 1);
    m.hit_at_1 += truth.count(top1[0]) ? 1 : 0;
    if (!truth.empty()) {
      auto topn = TopK(v.scores, static_cast<int>(truth.size()));
      int found = 0;
      for (int c : topn) found += truth.count(c) ? 1 : 0;
      m.perr += static_cast<double>(found) / static_cast<double>(truth.size());
    }
    for (int c : TopK(v.scores, k)) pooled.push_back({v.scores[c], c, truth.count(c) > 0});
  }
  m.hit_at_1 /= static_cast<double>(videos.size());
  m.perr /= static_cast<double>(videos.size());
  m.gap = RefAp(pooled, std::accumulate(positives.begin(), positives.end(), int64_t{0}));
  int counted = 0;
  for (int c = 0; c < classes; ++c) {
    if (positives[c] == 0) continue;
    std::vector<RefPair> mine;
    for (const RefPair& p : pooled)
      if (p.cls == c) mine.push_back(p);
    m.map += RefAp(mine, positives[c]);
    ++counted;
  }
  m.map /= counted;
  return m;
}

std::vector<Video> RandomVideos(int n, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  // Distinct scores: a random permutation of n*classes evenly spaced values.
  std::vector<float> values(static_cast<size_t>(n * classes));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = (static_cast<float>(i) + 0.5f) / static_cast<float>(values.size());
  std::shuffle(values.begin(), values.end(), rng);
  std::vector<Video> videos(n);
  for (int v = 0; v < n; ++v) {
    videos[v].scores.assign(values.begin() + v * classes, values.begin() + (v + 1) * classes);
    int nl = static_cast<int>(rng() % 4);  // 0..3 labels, some videos with none
    for (int i = 0; i < nl; ++i) {
      // Bias labels toward higher scores so the metrics are not all near zero.
      int c = rng() % 2 ? TopK(videos[v].scores, 8)[rng() % 8] : static_cast<int>(rng() % classes);
      videos[v].labels.push_back(c);
    }
  }
  return videos;
}

TEST(MetricsTest, RandomCaseMatchesReference) {
  const int classes = 40, k = 20;
  auto videos = RandomVideos(60, classes, 7);
  MetricsAccumulator acc(classes, k);
  for (const auto& v : videos) ASSERT_TRUE(acc.AddVideo(v.scores, v.labels).ok());
  EvalMetrics got = acc.Compute(), want = Reference(videos, classes, k);
  EXPECT_EQ(got.videos, want.videos);
  EXPECT_NEAR(got.gap, want.gap, 1e-12);
  EXPECT_NEAR(got.hit_at_1, want.hit_at_1, 1e-12);
  EXPECT_NEAR(got.perr, want.perr, 1e-12);
  EXPECT_NEAR(got.map, want.map, 1e-12);
  EXPECT_GT(want.gap, 0.05);  // the case is not degenerate
}

TEST(MetricsTest, MergeOfSerializedShardsEqualsWhole) {
  const int classes = 30, k = 20;
  auto videos = RandomVideos(50, classes, 11);
  MetricsAccumulator whole(classes, k), a(classes, k), b(classes, k);
  for (size_t i = 0; i < videos.size(); ++i) {
    ASSERT_TRUE(whole.AddVideo(videos[i].scores, videos[i].labels).ok());
    ASSERT_TRUE((i % 3 ? a : b).AddVideo(videos[i].scores, videos[i].labels).ok());
  }
  auto b2 = MetricsAccumulator::Deserialize(b.Serialize());
  ASSERT_TRUE(b2.ok()) << b2.status();
  ASSERT_TRUE(a.Merge(*b2).ok());
  EvalMetrics m = a.Compute(), w = whole.Compute();
  EXPECT_EQ(m.videos, w.videos);
  EXPECT_NEAR(m.gap, w.gap, 1e-12);
  EXPECT_NEAR(m.hit_at_1, w.hit_at_1, 1e-12);
  EXPECT_NEAR(m.perr, w.perr, 1e-12);
  EXPECT_NEAR(m.map, w.map, 1e-12);
}

TEST(MetricsTest, AddBatchChecksShape) {
  Batch batch;
  batch.ids = {"a", "b"};
  batch.label_offsets = {0, 1, 2};
  batch.label_ids = {0, 1};
  MetricsAccumulator acc(2, 20);
  Tensor scores({2, 2}, std::vector<float>{0.9f, 0.1f, 0.2f, 0.8f});
  ASSERT_TRUE(acc.AddBatch(scores, batch).ok());
  EXPECT_DOUBLE_EQ(acc.Compute().gap, 1.0);
  EXPECT_FALSE(acc.AddBatch(Tensor({2, 3}), batch).ok());
}

// A NaN score is refused naming its class (and in a batch its video), and the videos added before
// are kept as they were; infinities rank as the largest and smallest scores.
TEST(MetricsTest, RefusesNanScoresKeepingWhatCameBefore) {
  Batch batch;
  batch.ids = {"a", "b"};
  batch.label_offsets = {0, 1, 2};
  batch.label_ids = {0, 1};
  MetricsAccumulator acc(2, 20);
  ASSERT_TRUE(acc.AddVideo(std::vector<float>{0.9f, 0.1f}, std::vector<int32_t>{0}).ok());
  const EvalMetrics before = acc.Compute();
  Status s = acc.AddVideo(std::vector<float>{0.2f, std::nanf("")}, std::vector<int32_t>{});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("score of class 1 is NaN"), std::string::npos) << s;
  Tensor nan_b({2, 2}, std::vector<float>{0.9f, 0.1f, std::nanf(""), 0.8f});
  s = acc.AddBatch(nan_b, batch);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("video 'b'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("class 0"), std::string::npos) << s;
  // AddBatch stops at the bad video; the one before it counts, none after.
  EXPECT_EQ(acc.videos(), 2);
  EXPECT_DOUBLE_EQ(before.gap, 1.0);
  MetricsAccumulator inf(2, 20);
  const float big = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(inf.AddVideo(std::vector<float>{-big, big}, std::vector<int32_t>{1}).ok());
  EXPECT_DOUBLE_EQ(inf.Compute().hit_at_1, 1.0);
}

}  // namespace
}  // namespace reel::core
