// The "sync" optimizer's buckets reduced during backward (gradient_buckets.h): the layout, the
// sums equal to the same buckets reduced after backward to the last bit on 2 and 3 ranks (and to
// the whole-gradient allreduce on 2, where the ring's order of summation is the same), ranks that
// report nothing, a deadline while buckets are in flight, and a step left without Step().
#include "optim/gradient_buckets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <string>

#include "optim/sync_optimizer.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/testing/transport_conformance.h"
#include "train/tiny_run.h"

namespace reel::core {
namespace {

using conformance::Communicators;
using conformance::RunOnRanks;
using ::testing::HasSubstr;

// Blocks of awkward sizes (padding between them, ring chunks that do not divide them).
void DeclareBucketLayers(ParamArena& arena) {
  const std::pair<const char*, Shape> blocks[] = {{"l0/w", {37, 41}},   {"l0/b", {41}},
                                                  {"l1/w", {41, 29}},   {"l1/b", {29}},
                                                  {"head/w", {29, 53}}, {"head/b", {53}}};
  for (const auto& [name, shape] : blocks) ASSERT_TRUE(arena.Declare(name, shape).ok());
  arena.Finalize();
}

float BucketGrad(int rank, int step, size_t i) {
  return static_cast<float>(std::sin(0.731 * static_cast<double>(i) + 1.3 * rank + 0.7 * step)) *
         (1.0f + static_cast<float>(i % 7));
}

TEST(GradientBuckets, LayoutCoversTheArenaFromTheEndInWholeBlocks) {
  ParamArena arena;
  DeclareBucketLayers(arena);
  const auto& blocks = arena.blocks();
  for (const int64_t bytes : {int64_t{1}, int64_t{4096}, int64_t{9000}, int64_t{1} << 30}) {
    SCOPED_TRACE("bucket bytes " + std::to_string(bytes));
    std::vector<GradientRange> layout = BucketLayout(arena, bytes);
    ASSERT_FALSE(layout.empty());
    EXPECT_EQ(layout.front().end, arena.total_size());
    EXPECT_EQ(layout.back().begin, 0);
    for (size_t b = 0; b < layout.size(); ++b) {
      EXPECT_LT(layout[b].begin, layout[b].end);
      if (b + 1 < layout.size()) {
        EXPECT_EQ(layout[b + 1].end, layout[b].begin);  // descending, no gap, no overlap
        EXPECT_GE((layout[b].end - layout[b].begin) * 4, bytes);
      }
      bool starts_a_block = false;
      for (const auto& blk : blocks) starts_a_block |= blk.offset == layout[b].begin;
      EXPECT_TRUE(starts_a_block) << "bucket " << b << " cuts a block";
    }
    if (bytes == 1) {
      EXPECT_EQ(layout.size(), blocks.size());
    }
    if (bytes == int64_t{1} << 30) {
      EXPECT_EQ(layout.size(), 1u);
    }
  }
}

// One step of a model that writes its blocks last first and reports each when it is done.
void ReportingBackward(ParamArena& arena, GradientSink* sink, int rank, int step) {
  const auto& blocks = arena.blocks();
  for (size_t i = blocks.size(); i-- > 0;) {
    for (int64_t k = 0; k < blocks[i].size; ++k)
      arena.grads()[static_cast<size_t>(blocks[i].offset + k)] =
          BucketGrad(rank, step, static_cast<size_t>(blocks[i].offset + k));
    if (sink != nullptr) sink->GradientsReady(blocks[i].offset, blocks[i].size);
  }
}

Result<std::unique_ptr<Optimizer>> MakeBucketedSync(const std::string& bucket_mb) {
  REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(SyncOptimizerOptions(), {{"rule", "adam"},
                                                                         {"bucket_mb", bucket_mb},
                                                                         {"timeout_ms", "60000"}}));
  return MakeSyncOptimizer(o);
}

// Three Adam steps on `n` ranks; `report(rank)`: whether that rank's model reports its ranges.
std::vector<std::vector<float>> TrainBucketed(int n, const std::string& bucket_mb,
                                              const std::function<bool(int)>& report) {
  Communicators comms = testing::InprocRingGroup(n);
  std::vector<ParamArena> arenas(static_cast<size_t>(n));
  for (auto& a : arenas) DeclareBucketLayers(a);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    REEL_ASSIGN_OR_RETURN(auto opt, MakeBucketedSync(bucket_mb));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    GradientSink* sink = report(c.rank()) ? opt->gradient_sink() : nullptr;
    if (report(c.rank()) && (sink == nullptr) != (bucket_mb == "0"))
      return InternalError("a sink with bucket_mb 0, or none with buckets");
    for (int step = 1; step <= 3; ++step) {
      ReportingBackward(arena, sink, c.rank(), step);
      REEL_RETURN_IF_ERROR(opt->Step(0.01f));
    }
    return opt->Finish();
  });
  std::vector<std::vector<float>> out;
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
    out.emplace_back(arenas[r].values().begin(), arenas[r].values().end());
  }
  return out;
}

TEST(GradientBuckets, OverlappedEqualsTheSameBucketsReducedAfterBackwardBitForBit) {
  const auto all = [](int) { return true; };
  const auto none = [](int) { return false; };
  for (const int n : {2, 3}) {
    // 1e-6 MiB: every block its own bucket; 0.01: a few blocks each; 64: one bucket.
    for (const std::string mb : {"0.000001", "0.01", "64"}) {
      SCOPED_TRACE(std::to_string(n) + " ranks, bucket_mb " + mb);
      const auto overlapped = TrainBucketed(n, mb, all);
      const auto after = TrainBucketed(n, mb, none);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(overlapped[r], overlapped[0]) << "rank " << r;
        EXPECT_EQ(overlapped[r], after[r]) << "rank " << r;
      }
      // A rank that reports nothing (as one without data) still matches the others' buckets.
      const auto mixed = TrainBucketed(n, mb, [](int rank) { return rank == 0; });
      for (int r = 0; r < n; ++r) EXPECT_EQ(mixed[r], after[r]) << "rank " << r;
    }
  }
  // Two ranks sum each element in one order whatever the message: equal to the fused allreduce.
  const auto fused = TrainBucketed(2, "0", all);
  EXPECT_EQ(TrainBucketed(2, "0.000001", all)[1], fused[1]);
  EXPECT_EQ(TrainBucketed(2, "0.01", all)[0], fused[0]);
}

TEST(GradientBuckets, BucketsStartDuringBackwardInOrderOnlyWhenWhole) {
  Communicators comms = testing::InprocRingGroup(2);
  std::vector<ParamArena> arenas(2);
  for (auto& a : arenas) DeclareBucketLayers(a);
  std::vector<int> started(2, -1), reported_head(2, -1);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    GradientBuckets buckets(arena, c, 1, 0);  // one bucket per block
    const auto& blocks = arena.blocks();
    // head/b alone: the first bucket; then l0/w, whose bucket is the last: nothing more starts
    // until the blocks between are in.
    buckets.GradientsReady(blocks[5].offset, blocks[5].size);
    buckets.GradientsReady(blocks[0].offset, blocks[0].size);
    REEL_RETURN_IF_ERROR(buckets.Finish());
    reported_head[static_cast<size_t>(c.rank())] = buckets.started_early();
    ReportingBackward(arena, &buckets, c.rank(), 1);
    REEL_RETURN_IF_ERROR(buckets.Finish());
    started[static_cast<size_t>(c.rank())] = buckets.started_early();
    return Status::Ok();
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r];
    EXPECT_EQ(reported_head[r], 1);
    EXPECT_EQ(started[r], 6);
  }
  for (const auto& blk : arenas[0].blocks())
    for (int64_t k = 0; k < blk.size; ++k) {
      const size_t i = static_cast<size_t>(blk.offset + k);
      ASSERT_EQ(arenas[0].grads()[i], BucketGrad(0, 1, i) + BucketGrad(1, 1, i)) << blk.name << k;
    }
}

// Rank 1 never steps: rank 0's buckets, started during backward, meet the deadline, and Step()
// says which step and which bucket instead of hanging.
TEST(GradientBuckets, ADeadlineWhileBucketsAreInFlightFailsTheStepNamingIt) {
  Communicators comms = testing::InprocRingGroup(2);
  std::vector<ParamArena> arenas(2);
  for (auto& a : arenas) DeclareBucketLayers(a);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    REEL_ASSIGN_OR_RETURN(
        Options o,
        ParseOptions(SyncOptimizerOptions(), {{"bucket_mb", "0.000001"}, {"timeout_ms", "300"}}));
    REEL_ASSIGN_OR_RETURN(auto opt, MakeSyncOptimizer(o));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    if (c.rank() == 1) return Status::Ok();
    ReportingBackward(arena, opt->gradient_sink(), 0, 1);
    return opt->Step(0.1f);
  });
  ASSERT_TRUE(st[1].ok()) << st[1];
  EXPECT_EQ(st[0].code(), StatusCode::kDeadlineExceeded) << st[0];
  EXPECT_THAT(st[0].message(), HasSubstr("sync optimizer: step 1"));
  EXPECT_THAT(st[0].message(), HasSubstr("gradient bucket ["));
}

// Ranks that leave a step after Backward() (an error) destroy the optimizer: it waits for
// what it handed over, so the ranks' next collective, from the training thread, still pairs up.
TEST(GradientBuckets, AStepLeftWithoutStepEndsCleanlyAndCollectivesStayInStep) {
  Communicators comms = testing::InprocRingGroup(3);
  std::vector<ParamArena> arenas(3);
  for (auto& a : arenas) DeclareBucketLayers(a);
  std::vector<float> sums(3);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    {
      REEL_ASSIGN_OR_RETURN(auto opt, MakeBucketedSync("0.000001"));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
      const auto& blocks = arena.blocks();
      for (size_t i = blocks.size(); i-- > 3;)  // the head and l1/b only
        opt->gradient_sink()->GradientsReady(blocks[i].offset, blocks[i].size);
    }
    float one = 1.0f + static_cast<float>(c.rank());
    REEL_RETURN_IF_ERROR(c.AllReduce(std::span<float>(&one, 1), ReduceOp::kSum, NoDeadline()));
    sums[static_cast<size_t>(c.rank())] = one;
    return Status::Ok();
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
    EXPECT_EQ(sums[r], 6.0f);
  }
}

// A backend under the host's ring collectives that counts its sends by the hint in force
// (Communicator::SetComputeAlongside), as the tcp backend reads it to stop busy waiting.
class AlongsideCounter final : public Communicator {
 public:
  explicit AlongsideCounter(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status Send(int dest, int tag, std::span<const std::byte> data, Deadline deadline) override {
    ++(alongside_.load() ? sends_alongside : sends_alone);
    return inner_->Send(dest, tag, data, deadline);
  }
  Result<Message> Recv(int source, int tag, Deadline deadline) override {
    return inner_->Recv(source, tag, deadline);
  }
  Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) override {
    return inner_->RecvInto(source, tag, out, deadline);
  }
  void SetComputeAlongside(bool alongside) override { alongside_.store(alongside); }

  std::atomic<int> sends_alongside{0}, sends_alone{0};

 private:
  std::unique_ptr<Communicator> inner_;
  std::atomic<bool> alongside_{false};
};

// The buckets' reductions run beside backward: they tell the backend so (through the host's
// ring wrapper), and the hint is gone for the rank's own collectives after them.
TEST(GradientBuckets, TheirReductionsTellTheBackendComputeRunsAlongside) {
  auto raw = CreateInprocGroup(2);
  ASSERT_TRUE(raw.ok());
  std::vector<AlongsideCounter*> counters;
  Communicators comms;
  for (auto& c : *raw) {
    auto counter = std::make_unique<AlongsideCounter>(std::move(c));
    counters.push_back(counter.get());
    comms.push_back(WithRingCollectives(std::move(counter)));
  }
  std::vector<int> alone_before(2), alongside_after_step(2);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    const size_t r = static_cast<size_t>(c.rank());
    ParamArena arena;
    DeclareBucketLayers(arena);
    REEL_ASSIGN_OR_RETURN(auto opt, MakeBucketedSync("0.000001"));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    ReportingBackward(arena, opt->gradient_sink(), c.rank(), 1);
    REEL_RETURN_IF_ERROR(opt->Step(0.01f));
    alone_before[r] = counters[r]->sends_alone.load();
    alongside_after_step[r] = counters[r]->sends_alongside.load();
    float one = 1.0f;
    REEL_RETURN_IF_ERROR(c.AllReduce(std::span<float>(&one, 1), ReduceOp::kSum, NoDeadline()));
    return opt->Finish();
  });
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
    EXPECT_GT(alongside_after_step[r], 0) << "rank " << r;
    // The rank's own AllReduce after the step: sent without the hint.
    EXPECT_EQ(counters[r]->sends_alongside.load(), alongside_after_step[r]) << "rank " << r;
    EXPECT_GT(counters[r]->sends_alone.load(), alone_before[r]) << "rank " << r;
  }
}

TEST(GradientBuckets, BadBucketSizesAreRefused) {
  for (const std::string bad : {"-1", "4096", "nan"}) {
    auto opt = MakeBucketedSync(bad);
    EXPECT_EQ(opt.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(opt.status().message(), HasSubstr("bucket_mb")) << bad;
  }
}

}  // namespace
}  // namespace reel::core
