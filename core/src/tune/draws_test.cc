// reel's own seeded draws: the first draws of a seed are pinned, so a search names the same
// trials on every standard library. The pinned values were computed by an independent Python
// implementation of std::mt19937_64 (checked against the standard's 10000th output) and of the
// rules in draws.h, not by this code.
#include "draws.h"

#include <gtest/gtest.h>

#include <numeric>

#include "reel/core/tune.h"
#include "search_space.h"

namespace reel::core::tune {
namespace {

TEST(DrawsTest, TheEngineIsTheStandardOne) {
  std::mt19937_64 gen;  // default seed 5489
  gen.discard(9999);
  EXPECT_EQ(gen(), 9981545732273789042ull);  // [rand.predef]
}

TEST(DrawsTest, TheFirstDrawsOfASeedArePinned) {
  std::mt19937_64 a(42);
  std::vector<uint64_t> indices;
  for (int i = 0; i < 5; ++i) indices.push_back(UniformIndex(a, 10));
  EXPECT_EQ(indices, (std::vector<uint64_t>{6, 4, 0, 2, 1}));
  std::mt19937_64 b(42);
  EXPECT_DOUBLE_EQ(UniformUnit(b), 0.755155532954539);
  EXPECT_DOUBLE_EQ(UniformUnit(b), 0.6390313938546974);
  EXPECT_DOUBLE_EQ(UniformUnit(b), 0.7521452007480266);
  std::mt19937_64 c(7);
  std::vector<int> v(10);
  std::iota(v.begin(), v.end(), 0);
  Shuffle(v, c);
  EXPECT_EQ(v, (std::vector<int>{0, 7, 4, 9, 3, 1, 2, 8, 6, 5}));
}

TEST(DrawsTest, RangesHoldTheirEnds) {
  std::mt19937_64 gen(1);
  bool low = false, high = false;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = UniformInt(gen, -2, 2);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 2);
    low |= v == -2;
    high |= v == 2;
    const double r = LogUniform(gen, 1e-3, 1e-1);
    ASSERT_GE(r, 1e-3 * (1 - 1e-12));
    ASSERT_LE(r, 1e-1 * (1 + 1e-12));
  }
  EXPECT_TRUE(low && high);
  EXPECT_EQ(UniformInt(gen, 5, 5), 5);
}

TEST(DrawsTest, TheFirstSamplesOfASearchSpaceArePinned) {
  auto f = ParseTuneConfig(R"(
    base {
      data { name: "fake" }
      model { name: "fake" options { key: "hidden" value: "8" } }
      trainer { steps: 9 batch_size: 8 }
    }
    dimension { field: "trainer.learning_rate.base" min: 1e-4 max: 1e-1 scale: LOG }
    dimension { field: "trainer.batch_size" min: 8 max: 64 integer: true }
    dimension { field: "model.options.hidden" values: ["8", "16", "32", "64"] })",
                           "search.pbtxt");
  ASSERT_TRUE(f.ok()) << f.status();
  auto space = SearchSpace::Create(f->tune, f->base);
  ASSERT_TRUE(space.ok()) << space.status();
  const std::vector<std::vector<std::string>> want = {
      {"0.0206288", "51", "16"}, {"0.00353637", "53", "64"}, {"0.0129889", "18", "32"}};
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<std::string> got;
    for (const Param& p : space->Sample(5, i)) got.push_back(p.value);
    EXPECT_EQ(got, want[static_cast<size_t>(i)]) << "sample " << i << " of seed 5";
  }
}

}  // namespace
}  // namespace reel::core::tune
