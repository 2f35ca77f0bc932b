// The ring allreduce schedule (reel/ring_allreduce.h) on its own: n ranks simulated in memory, each
// unit's chunk moved from a rank to its right neighbour exactly as a ring would, must leave every
// rank with the sum, at every awkward size and with many chunks per segment.
#include "reel/ring_allreduce.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace reel::ring {
namespace {

// Runs the schedule unit by unit over `ranks` buffers; chunk_bytes small enough for many chunks.
std::vector<std::vector<float>> Simulate(int ranks, size_t count, size_t chunk_bytes) {
  std::vector<std::vector<float>> data(static_cast<size_t>(ranks), std::vector<float>(count));
  for (int r = 0; r < ranks; ++r)
    for (size_t i = 0; i < count; ++i) data[r][i] = static_cast<float>((r + 1) * 1000 + i % 997);
  std::vector<Schedule> s;
  for (int r = 0; r < ranks; ++r) s.emplace_back(count, ranks, r, chunk_bytes);
  for (int64_t u = 0; u < s[0].units(); ++u) {
    // Every rank sends unit u to its right neighbour at once: take all the chunks first.
    std::vector<std::vector<float>> sent(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      std::span<float> chunk = s[r].Chunk(std::span<float>(data[r]), u, /*sent=*/true);
      sent[r].assign(chunk.begin(), chunk.end());
    }
    for (int r = 0; r < ranks; ++r) {
      const int left = (r + ranks - 1) % ranks;
      std::span<float> into = s[r].Chunk(std::span<float>(data[r]), u, /*sent=*/false);
      EXPECT_EQ(into.size(), sent[left].size()) << "unit " << u << " rank " << r;
      if (into.size() != sent[left].size()) return data;
      EXPECT_LE(into.size(), s[r].max_chunk());
      if (s[r].Reducing(u))
        Reduce(into.data(), sent[left].data(), into.size(), ReduceOp::kSum);
      else
        std::copy(sent[left].begin(), sent[left].end(), into.begin());
    }
  }
  return data;
}

TEST(RingSchedule, EveryRankEndsWithTheSumAtEverySize) {
  for (int ranks : {2, 3, 4, 5}) {
    for (size_t count :
         {size_t{1}, size_t(ranks - 1), size_t(ranks + 1), size_t{997}, size_t{4096}}) {
      for (size_t chunk_bytes : {size_t{16}, size_t{1} << 20}) {
        const std::string where = std::to_string(ranks) + " ranks, " + std::to_string(count) +
                                  " floats, chunks of " + std::to_string(chunk_bytes) + " bytes";
        std::vector<std::vector<float>> data = Simulate(ranks, count, chunk_bytes);
        for (int r = 0; r < ranks; ++r)
          for (size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int q = 0; q < ranks; ++q) want += static_cast<float>((q + 1) * 1000 + i % 997);
            ASSERT_EQ(data[r][i], want) << where << ": rank " << r << " index " << i;
          }
      }
    }
  }
}

TEST(RingSchedule, ChunksAndUnits) {
  // 2 ranks, 1 MiB: segments of 512 KiB, two 256 KiB chunks each; 2 steps of 2 units.
  const Schedule s(size_t{1} << 18, 2, 0, size_t{256} << 10);
  EXPECT_EQ(s.chunks(), 2u);
  EXPECT_EQ(s.units(), 4);
  EXPECT_TRUE(s.Reducing(1));
  EXPECT_FALSE(s.Reducing(2));
  EXPECT_EQ(s.SentFromSamePlace(3), 1);
  EXPECT_EQ(s.max_chunk(), size_t{1} << 16);
}

TEST(RingSchedule, MaxAndMinReduce) {
  std::vector<float> a = {1, 5, -3}, b = {4, 2, -7};
  std::vector<float> mx = a, mn = a;
  Reduce(mx.data(), b.data(), 3, ReduceOp::kMax);
  Reduce(mn.data(), b.data(), 3, ReduceOp::kMin);
  EXPECT_EQ(mx, (std::vector<float>{4, 5, -3}));
  EXPECT_EQ(mn, (std::vector<float>{1, 2, -7}));
}

}  // namespace
}  // namespace reel::ring
