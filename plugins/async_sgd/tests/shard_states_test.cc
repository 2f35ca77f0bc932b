// The servers' state re-cut for another number of servers (src/shard_states.h): the moments of
// every parameter stay with it, versions and step counts take the newest, bad parts are refused.
#include "shard_states.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "async_config.h"

namespace reel::async_sgd {
namespace {

using ::testing::HasSubstr;

// A shard's part as ShardServer::Cut() writes it: version, then UpdateRule::SaveState().
std::string Part(int64_t version, int64_t steps, const std::vector<float>& m1,
                 const std::vector<float>& m2) {
  std::string out;
  auto put = [&out](const void* v, size_t n) { out.append(static_cast<const char*>(v), n); };
  put(&version, sizeof version);
  put(&steps, sizeof steps);
  for (const std::vector<float>* m : {&m1, &m2}) {
    const uint64_t n = m->size();
    put(&n, sizeof n);
    put(m->data(), n * sizeof(float));
  }
  return out;
}

// Moment vector `k` of every part, laid end to end; and the versions and step counts.
std::vector<float> Moments(const std::vector<std::string>& parts, int k,
                           std::vector<int64_t>* versions = nullptr) {
  std::vector<float> out;
  for (const std::string& p : parts) {
    int64_t head[2];
    std::memcpy(head, p.data(), sizeof head);
    if (versions) versions->insert(versions->end(), {head[0], head[1]});
    size_t at = sizeof head;
    for (int j = 0; j < 2; ++j) {
      uint64_t n;
      std::memcpy(&n, p.data() + at, sizeof n);
      at += sizeof n;
      if (j == k)
        for (uint64_t i = 0; i < n; ++i) {
          float f;
          std::memcpy(&f, p.data() + at + i * sizeof f, sizeof f);
          out.push_back(f);
        }
      at += n * sizeof(float);
    }
    EXPECT_EQ(at, p.size());
  }
  return out;
}

// Adam's two moments over 10 parameters in 3 shards (4, 3, 3), re-cut for 2 servers and back.
TEST(ReshardStates, EveryParameterKeepsItsMoments) {
  constexpr int64_t kTotal = 10;
  std::vector<std::string> three;
  std::vector<float> m1, m2;
  for (int s = 0; s < 3; ++s) {
    const ShardRange r = ShardOf(kTotal, 3, s);
    std::vector<float> a, b;
    for (int64_t i = r.offset; i < r.offset + r.size; ++i) {
      a.push_back(static_cast<float>(i) + 0.5f);
      b.push_back(static_cast<float>(100 + i));
    }
    m1.insert(m1.end(), a.begin(), a.end());
    m2.insert(m2.end(), b.begin(), b.end());
    three.push_back(Part(40 + s, 20 + (s == 1 ? 3 : 0), a, b));
  }
  std::vector<std::string_view> views(three.begin(), three.end());
  Result<std::vector<std::string>> two = ReshardStates(views, kTotal, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 2u);
  std::vector<int64_t> heads;
  EXPECT_EQ(Moments(*two, 0, &heads), m1);
  EXPECT_EQ(Moments(*two, 1), m2);
  EXPECT_EQ(heads, (std::vector<int64_t>{42, 23, 42, 23}));  // the newest version, most steps
  // The parts' sizes follow the new ranges (5 and 5).
  EXPECT_EQ((*two)[0].size(), 16 + 2 * (8 + 5 * sizeof(float)));
  std::vector<std::string_view> back_views(two->begin(), two->end());
  Result<std::vector<std::string>> back = ReshardStates(back_views, kTotal, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Moments(*back, 0), m1);
  EXPECT_EQ(Moments(*back, 1), m2);
  EXPECT_EQ((*back)[1], Part(42, 23, std::vector<float>(m1.begin() + 4, m1.begin() + 7),
                             std::vector<float>(m2.begin() + 4, m2.begin() + 7)));
}

// Plain sgd keeps no moments: only the version and the step count carry over.
TEST(ReshardStates, RulesWithoutMomentsCarryTheVersion) {
  std::vector<std::string> one = {Part(7, 7, {}, {})};
  std::vector<std::string_view> views(one.begin(), one.end());
  Result<std::vector<std::string>> three = ReshardStates(views, 5, 3);
  ASSERT_TRUE(three.ok()) << three.status();
  for (const std::string& p : *three) EXPECT_EQ(p, Part(7, 7, {}, {}));
}

TEST(ReshardStates, MalformedPartsAreDataLoss) {
  auto refused = [](std::vector<std::string> parts, int64_t total, const std::string& why) {
    std::vector<std::string_view> views(parts.begin(), parts.end());
    Result<std::vector<std::string>> r = ReshardStates(views, total, 2);
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(why));
  };
  refused({Part(1, 1, {1, 2}, {}), Part(1, 1, {3, 4}, {})}, 5,
          "shard 0 holds 2 moments for its 3 parameters");
  refused({Part(1, 1, {1, 2}, {}), Part(1, 1, {}, {})}, 4, "shard 1 has no moment vector 0");
  refused({Part(1, 1, {1, 2}, {}), Part(1, 1, {3, 4}, {}).substr(0, 20)}, 4,
          "shard 1: update rule state is truncated");
  refused({Part(1, 1, {1, 2}, {}) + "x", Part(1, 1, {3, 4}, {})}, 4,
          "shard 0: update rule state has trailing bytes");
}

}  // namespace
}  // namespace reel::async_sgd
