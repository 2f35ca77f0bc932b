// Agreeing on a collective's arguments (reel/collective_agreement.h) on its own: n ranks as
// threads over in-memory queues must each learn every rank's arguments, and ranks that disagree
// must all get the same InvalidArgument naming what each passed.
#include "reel/collective_agreement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace reel::agreement {
namespace {

using ::testing::HasSubstr;

// One FIFO per (source, destination), as a transport keeps one tag's messages in order.
class Queues {
 public:
  Status Send(int from, int to, std::span<const std::byte> bytes) {
    std::lock_guard lock(mu_);
    q_[{from, to}].emplace_back(bytes.begin(), bytes.end());
    ++sent_;
    cv_.notify_all();
    return Status::Ok();
  }
  Result<std::vector<std::byte>> Recv(int from, int to) {
    std::unique_lock lock(mu_);
    auto& q = q_[{from, to}];
    cv_.wait(lock, [&] { return !q.empty(); });
    std::vector<std::byte> m = std::move(q.front());
    q.pop_front();
    return m;
  }
  int sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }
  bool AllTaken() {
    std::lock_guard lock(mu_);
    for (auto& [pair, q] : q_)
      if (!q.empty()) return false;
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<std::vector<std::byte>>> q_;
  int sent_ = 0;
};

std::vector<Result<std::vector<Args>>> Gather(const std::vector<Args>& mine, Queues& queues) {
  const int n = static_cast<int>(mine.size());
  std::vector<Result<std::vector<Args>>> out(mine.size(), InternalError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      out[static_cast<size_t>(r)] = GatherArgs(
          r, n, mine[static_cast<size_t>(r)],
          [&](int dest, std::span<const std::byte> b) { return queues.Send(r, dest, b); },
          [&](int source) { return queues.Recv(source, r); });
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(CollectiveAgreementTest, EveryRankLearnsEveryRanksArgumentsInLogRounds) {
  for (int n = 1; n <= 9; ++n) {
    std::vector<Args> mine;
    for (int r = 0; r < n; ++r)
      mine.push_back(AllReduceArgs(10 + static_cast<size_t>(r), ReduceOp::kSum));
    Queues queues;
    auto all = Gather(mine, queues);
    int rounds = 0;
    while ((1 << rounds) < n) ++rounds;
    EXPECT_EQ(queues.sent(), n * rounds) << n << " ranks";
    EXPECT_TRUE(queues.AllTaken()) << n << " ranks: a message was left unreceived";
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(all[static_cast<size_t>(r)].ok()) << all[static_cast<size_t>(r)].status();
      EXPECT_EQ(*all[static_cast<size_t>(r)], mine) << n << " ranks, rank " << r;
    }
  }
}

TEST(CollectiveAgreementTest, RanksThatDisagreeAllGetTheSameExplanation) {
  const std::vector<Args> mine = {
      AllReduceArgs(10, ReduceOp::kSum), AllReduceArgs(0, ReduceOp::kSum),
      AllReduceArgs(10, ReduceOp::kSum), AllReduceArgs(10, ReduceOp::kMax), BroadcastArgs(8, 2)};
  Queues queues;
  auto all = Gather(mine, queues);
  std::string first;
  for (size_t r = 0; r < mine.size(); ++r) {
    ASSERT_TRUE(all[r].ok()) << all[r].status();
    Status s = CheckAgreement(*all[r]);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    if (r == 0) first = s.message();
    EXPECT_EQ(s.message(), first) << "rank " << r;
  }
  EXPECT_THAT(first, HasSubstr("AllReduce (sum) of 10 floats on ranks 0, 2"));
  EXPECT_THAT(first, HasSubstr("AllReduce (sum) of 0 floats on rank 1"));
  EXPECT_THAT(first, HasSubstr("AllReduce (max) of 10 floats on rank 3"));
  EXPECT_THAT(first, HasSubstr("Broadcast of 8 bytes from rank 2 on rank 4"));
}

TEST(CollectiveAgreementTest, AgreeingRanksPass) {
  const std::vector<Args> same(4, AllGatherArgs(16));
  EXPECT_TRUE(CheckAgreement(same).ok());
  EXPECT_TRUE(CheckAgreement(std::vector<Args>{BarrierArgs()}).ok());
}

TEST(CollectiveAgreementTest, AShortMessageIsAnErrorNotARead) {
  auto all = GatherArgs(
      0, 2, BarrierArgs(), [](int, std::span<const std::byte>) { return Status::Ok(); },
      [](int) -> Result<std::vector<std::byte>> { return std::vector<std::byte>(3); });
  EXPECT_EQ(all.status().code(), StatusCode::kInternal) << all.status();
}

}  // namespace
}  // namespace reel::agreement
