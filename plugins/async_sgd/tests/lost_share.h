// What `reel train` with async_sgd says of a worker lost mid-run, checked against what the server
// applied of it: shared by the tests that kill or stop a worker under `reel launch`.
#ifndef REEL_PLUGINS_ASYNC_SGD_TESTS_LOST_SHARE_H_
#define REEL_PLUGINS_ASYNC_SGD_TESTS_LOST_SHARE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <string>

namespace reel::e2e {

// In launch's output `out` of a run of `budget` steps per worker (push_every 1, batches of
// `batch`) served by rank 0 alone, after worker rank `victim` was lost: the server's count of the
// victim's pushes it applied (one per step) is what the summary of the lead (rank `lead`) counts
// as trained, exactly, and the rest of the victim's budget as not trained, at about its mean
// batch (`batch` but for the short last batch of an epoch).
inline void ExpectTheLostShareFromTheServersCount(const std::string& out, int victim, int lead,
                                                  int64_t budget, int64_t batch) {
  const std::string v = std::to_string(victim);
  std::smatch server;
  ASSERT_TRUE(std::regex_search(
      out, server,
      std::regex("\\[rank 0\\] async_sgd server rank 0 \\(shard 0\\): worker rank " + v +
                 " was lost after its step [0-9]+ \\(([0-9]+) pushes applied, up to its step "
                 "([0-9]+)\\)")))
      << out;
  EXPECT_EQ(server[1], server[2]);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m,
      std::regex("\\[rank " + std::to_string(lead) + "\\] +lost rank " + v +
                 " after step ([0-9]+): ([0-9]+) steps \\(about ([0-9]+) examples\\) of its "
                 "share not trained")))
      << out;
  EXPECT_EQ(m[1], server[2]);
  EXPECT_GT(std::stoll(m[1]), 0);
  EXPECT_EQ(std::stoll(m[1]) + std::stoll(m[2]), budget);
  EXPECT_GT(std::stoll(m[3]), 0);
  EXPECT_LE(std::stoll(m[3]), std::stoll(m[2]) * batch);
}

}  // namespace reel::e2e

#endif  // REEL_PLUGINS_ASYNC_SGD_TESTS_LOST_SHARE_H_
