// The sync optimizer's sharded update (zero_stage 1, sharded_update.h) against the unsharded one:
// the same parameters, norms and checkpoints, on 2, 3 and 4 inproc ranks, for every update rule;
// resumes across rank counts and between sharded and unsharded runs; a lost peer.
#include "optim/sharded_update.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <thread>

#include "optim/sync_optimizer.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/shard_layout.h"
#include "train/tiny_run.h"

namespace reel::core {
namespace {

using ::testing::HasSubstr;
using OptionMap = std::map<std::string, std::string>;

TEST(ShardLayout, ContiguousAlignedCoveringAndBalanced) {
  for (size_t ranks : {1, 2, 3, 4, 7})
    for (size_t total : {0, 1, 15, 16, 17, 47, 48, 100, 301, 4096, 100001}) {
      size_t next = 0, longest = 0, shortest = total;
      for (size_t r = 0; r < ranks; ++r) {
        const ShardRange s = ShardOf(total, ranks, r);
        EXPECT_EQ(s.offset, next) << total << " floats, " << ranks << " ranks, shard " << r;
        if (s.length > 0) {
          EXPECT_EQ(s.offset % kShardAlignFloats, 0u);
        }
        if (r > 0) {
          EXPECT_LE(s.length, ShardOf(total, ranks, r - 1).length);  // longer first
        }
        next = s.offset + s.length;
        longest = std::max(longest, s.length);
        shortest = std::min(shortest, s.length);
      }
      EXPECT_EQ(next, total) << total << " floats, " << ranks << " ranks";
      // Balanced to a block: a shorter last block aside, lengths differ by at most 16 floats.
      EXPECT_LE(longest - shortest, total < ranks * kShardAlignFloats ? 16u : 2 * 16u);
    }
  // Fewer blocks than ranks: the last ranks' shards are empty.
  EXPECT_EQ(ShardOf(20, 4, 0).length, 16u);
  EXPECT_EQ(ShardOf(20, 4, 1).length, 4u);
  EXPECT_EQ(ShardOf(20, 4, 2).length, 0u);
  EXPECT_EQ(ShardOf(20, 4, 3).length, 0u);
}

// What one rank's training run ends with.
struct RankEnd {
  Status status;
  std::vector<float> values;
  double norm = 0.0;  // the last step's
  std::string state;  // the lead's SaveState() after GatherState() on every rank
};

// Runs fn(rank, comm) on `comms.size()` threads.
std::vector<RankEnd> OnThreads(
    std::vector<std::unique_ptr<Communicator>>& comms,
    const std::function<RankEnd(int, std::unique_ptr<Communicator>&)>& fn) {
  std::vector<RankEnd> ends(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] { ends[r] = fn(static_cast<int>(r), comms[r]); });
  for (auto& t : threads) t.join();
  return ends;
}

// A few blocks of odd sizes (padding between them), `floats` floats in the last.
void DeclareSharded(ParamArena& arena, int64_t floats) {
  ASSERT_TRUE(arena.Declare("w", {3, 5}).ok());
  ASSERT_TRUE(arena.Declare("b", {floats}).ok());
  arena.Finalize();
}
// A one-block arena of 5 floats: fewer than 16 per rank, so ranks past the first hold nothing.
void DeclareTiny(ParamArena& arena, int64_t) {
  ASSERT_TRUE(arena.Declare("t", {5}).ok());
  arena.Finalize();
}

float ShardedGrad(int rank, int step, size_t i) {
  return static_cast<float>(std::cos(0.29 * static_cast<double>(i) + 0.7 * rank + 0.3 * step));
}

struct TrainSpec {
  int ranks = 2;
  OptionMap options;
  double clip = 0.0;
  int first_step = 1, steps = 4;
  std::vector<float> start;  // rank 0's initial values (empty: made up); the others' are garbage
  std::string restore;       // a checkpoint's optimizer state, for every rank
  void (*declare)(ParamArena&, int64_t) = DeclareSharded;
  int64_t floats = 300;
};

// Trains as the trainer does: rank ranks-1 has no data on the second step (zero gradients, the
// StepWithoutData path); then GatherState() on every rank and SaveState() on the lead.
std::vector<RankEnd> TrainSharded(const TrainSpec& run) {
  auto comms = testing::InprocRingGroup(run.ranks);
  return OnThreads(comms, [&](int rank, std::unique_ptr<Communicator>& c) {
    RankEnd end;
    ParamArena arena;
    run.declare(arena, run.floats);
    std::span<float> v = arena.values();
    for (size_t i = 0; i < v.size(); ++i)
      v[i] =
          rank == 0 && !run.start.empty() ? run.start[i] : static_cast<float>(rank + 1) * 0.01f * i;
    end.status = [&]() -> Status {
      REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(SyncOptimizerOptions(), run.options));
      REEL_ASSIGN_OR_RETURN(auto opt, MakeSyncOptimizer(o));
      if (!opt->AcceptGradientClipping(run.clip)) return InternalError("clipping declined");
      // A resume restores before Setup() on even ranks, after it on odd ones: both must work.
      if (!run.restore.empty() && rank % 2 == 0)
        REEL_RETURN_IF_ERROR(opt->RestoreState(run.restore));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, *c));
      if (!run.restore.empty() && rank % 2 == 1)
        REEL_RETURN_IF_ERROR(opt->RestoreState(run.restore));
      for (int step = run.first_step; step < run.first_step + run.steps; ++step) {
        const bool idle = rank == run.ranks - 1 && step == run.first_step + 1;
        for (size_t i = 0; i < v.size(); ++i)
          arena.grads()[i] = idle ? 0.0f : ShardedGrad(rank, step, i);
        REEL_RETURN_IF_ERROR(opt->Step(0.05f));
      }
      end.norm = opt->last_gradient_norm();
      REEL_RETURN_IF_ERROR(opt->GatherState());
      if (rank == 0) {
        REEL_ASSIGN_OR_RETURN(end.state, opt->SaveState());
      }
      return opt->Finish();
    }();
    end.values.assign(v.begin(), v.end());
    return end;
  });
}

OptionMap Sharded(OptionMap o) {
  o["zero_stage"] = "1";
  return o;
}

void ExpectOk(const std::vector<RankEnd>& ends, const char* what) {
  for (size_t r = 0; r < ends.size(); ++r)
    ASSERT_TRUE(ends[r].status.ok()) << what << ", rank " << r << ": " << ends[r].status;
}

// Every rank of `got` holds the same bits; they equal `want`'s rank 0 bit for bit (`tolerance`
// 0) or within `tolerance` relative to the largest value.
void ExpectSameParameters(const std::vector<RankEnd>& got, const std::vector<RankEnd>& want,
                          double tolerance) {
  ASSERT_FALSE(got.empty());
  ASSERT_EQ(got[0].values.size(), want[0].values.size());
  for (size_t r = 1; r < got.size(); ++r) ASSERT_EQ(got[r].values, got[0].values) << "rank " << r;
  if (tolerance == 0.0) {
    for (size_t i = 0; i < got[0].values.size(); ++i)
      ASSERT_EQ(got[0].values[i], want[0].values[i]) << "parameter " << i;
    return;
  }
  float scale = 0.0f;
  for (float x : want[0].values) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < got[0].values.size(); ++i)
    ASSERT_NEAR(got[0].values[i], want[0].values[i], tolerance * scale) << "parameter " << i;
}

class ShardedUpdateTest : public ::testing::TestWithParam<std::tuple<int, std::string, bool>> {};

// Without a clip every element is summed in the allreduce's order (the ring's halves) and
// updated by the same arithmetic: the same bits, and the checkpoint's state bytes are the
// unsharded run's. With a clip the global norm's squares are summed shard by shard, not over
// the whole gradient in one order, so the norm (and the clip's scale) may differ in the last
// bits: parameters within 1e-6 of the largest.
TEST_P(ShardedUpdateTest, SameAsUnshardedOnEveryRank) {
  const auto& [n, rule, clip] = GetParam();
  TrainSpec run;
  run.ranks = n;
  run.options = {{"rule", rule == "nesterov" ? "momentum" : rule}};
  if (rule == "nesterov") run.options["nesterov"] = "true";
  run.clip = clip ? 0.5 : 0.0;
  const std::vector<RankEnd> plain = TrainSharded(run);
  ExpectOk(plain, "unsharded");
  run.options = Sharded(run.options);
  const std::vector<RankEnd> sharded = TrainSharded(run);
  ExpectOk(sharded, "sharded");
  ExpectSameParameters(sharded, plain, clip ? 1e-6 : 0.0);
  EXPECT_NEAR(sharded[0].norm, plain[0].norm, 1e-12 * plain[0].norm);
  if (clip) {
    EXPECT_GT(plain[0].norm, 0.5) << "the clip must bind";
  } else {
    EXPECT_EQ(sharded[0].state, plain[0].state) << "the checkpoint's optimizer state";
  }
  EXPECT_NE(sharded[0].values[0], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShardedUpdateTest,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values("sgd", "momentum", "nesterov",
                                                              "adagrad", "adam"),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" +
                                  std::get<1>(info.param) +
                                  (std::get<2>(info.param) ? "_clipped" : "");
                         });

TEST(ShardedUpdate, AnArenaSmallerThanSixteenFloatsPerRank) {
  for (const char* rule : {"adam", "adagrad"}) {
    TrainSpec run;
    run.ranks = 4;
    run.declare = DeclareTiny;
    run.options = {{"rule", rule}};
    const std::vector<RankEnd> plain = TrainSharded(run);
    ExpectOk(plain, rule);
    run.options = Sharded(run.options);
    const std::vector<RankEnd> sharded = TrainSharded(run);
    ExpectOk(sharded, rule);
    ExpectSameParameters(sharded, plain, 0.0);
    EXPECT_EQ(sharded[0].state, plain[0].state) << rule;
  }
}

// A checkpoint written by one run (sharded or not, on some ranks) and resumed by another: the
// parameters continue bit for bit as when the unsharded runs do the same.
struct Leg {
  int ranks;
  bool sharded;
};
std::vector<RankEnd> Chain(Leg first, Leg second, const std::string& rule) {
  TrainSpec a;
  a.ranks = first.ranks;
  a.options = {{"rule", rule}};
  if (first.sharded) a.options = Sharded(a.options);
  a.steps = 3;
  std::vector<RankEnd> one = TrainSharded(a);
  for (const RankEnd& e : one)
    if (!e.status.ok()) return one;
  TrainSpec b;
  b.ranks = second.ranks;
  b.options = {{"rule", rule}};
  if (second.sharded) b.options = Sharded(b.options);
  b.first_step = 4;
  b.steps = 3;
  b.start = one[0].values;
  b.restore = one[0].state;
  return TrainSharded(b);
}

TEST(ShardedUpdate, ResumesOnOtherRankCountsAndBetweenShardedAndUnsharded) {
  for (const char* rule : {"adam", "adagrad", "momentum"}) {
    SCOPED_TRACE(rule);
    for (auto [first, second] :
         std::vector<std::pair<Leg, Leg>>{{{2, true}, {3, true}},   // 2 -> 3, sharded
                                          {{3, true}, {1, false}},  // 3 -> 1, sharded -> unsharded
                                          {{2, false}, {3, true}},  // unsharded -> sharded
                                          {{3, true}, {2, false}}}) {
      SCOPED_TRACE(std::to_string(first.ranks) + (first.sharded ? " sharded" : "") + " -> " +
                   std::to_string(second.ranks) + (second.sharded ? " sharded" : ""));
      const std::vector<RankEnd> plain = Chain({first.ranks, false}, {second.ranks, false}, rule);
      ExpectOk(plain, "unsharded chain");
      const std::vector<RankEnd> got = Chain(first, second, rule);
      ExpectOk(got, "chain");
      ExpectSameParameters(got, plain, 0.0);
      EXPECT_EQ(got[0].state, plain[0].state);
    }
  }
}

// The same rank count: a resumed sharded run equals one that never stopped.
TEST(ShardedUpdate, ResumedRunEqualsAnUninterruptedOne) {
  TrainSpec whole;
  whole.ranks = 3;
  whole.options = Sharded({{"rule", "adam"}});
  whole.steps = 6;
  // TrainSharded() idles the last rank on the second step of each leg: in the uninterrupted run
  // too.
  const std::vector<RankEnd> resumed = Chain({3, true}, {3, true}, "adam");
  ExpectOk(resumed, "resumed");
  std::vector<RankEnd> halves = TrainSharded([&] {
    TrainSpec r = whole;
    r.steps = 3;
    return r;
  }());
  ExpectOk(halves, "first half");
  EXPECT_FALSE(halves[0].state.empty());
  // Uninterrupted: one optimizer, six steps with the same gradients and idle steps as the chain.
  auto comms = testing::InprocRingGroup(3);
  std::vector<RankEnd> straight = OnThreads(comms, [&](int rank, std::unique_ptr<Communicator>& c) {
    RankEnd end;
    ParamArena arena;
    DeclareSharded(arena, 300);
    std::span<float> v = arena.values();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(rank + 1) * 0.01f * i;
    end.status = [&]() -> Status {
      REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(SyncOptimizerOptions(), whole.options));
      REEL_ASSIGN_OR_RETURN(auto opt, MakeSyncOptimizer(o));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, *c));
      for (int step = 1; step <= 6; ++step) {
        const bool idle = rank == 2 && (step == 2 || step == 5);
        for (size_t i = 0; i < v.size(); ++i)
          arena.grads()[i] = idle ? 0.0f : ShardedGrad(rank, step, i);
        REEL_RETURN_IF_ERROR(opt->Step(0.05f));
      }
      return Status::Ok();
    }();
    end.values.assign(v.begin(), v.end());
    return end;
  });
  ExpectOk(straight, "uninterrupted");
  ExpectSameParameters(resumed, straight, 0.0);
}

// A peer that leaves fails the step on the others, naming it and the phase.
TEST(ShardedUpdate, ALostPeerFailsTheStepNamingIt) {
  for (const bool after_reduce_scatter : {false, true}) {
    auto comms = testing::InprocRingGroup(3);
    std::vector<RankEnd> ends = OnThreads(comms, [&](int rank, std::unique_ptr<Communicator>& c) {
      RankEnd end;
      ParamArena arena;
      DeclareSharded(arena, 300);
      end.status = [&]() -> Status {
        REEL_ASSIGN_OR_RETURN(
            Options o,
            ParseOptions(SyncOptimizerOptions(), {{"zero_stage", "1"}, {"timeout_ms", "1000"}}));
        REEL_ASSIGN_OR_RETURN(auto opt, MakeSyncOptimizer(o));
        REEL_RETURN_IF_ERROR(opt->Setup(arena, *c));
        REEL_RETURN_IF_ERROR(opt->Step(0.1f));
        if (rank == 2) {
          // Takes part in the step's reduce-scatter and norm, then leaves before the gather.
          if (after_reduce_scatter) {
            REEL_RETURN_IF_ERROR(c->ReduceScatter(arena.grads(), ReduceOp::kSum, NoDeadline()));
            double mine = 0.0;
            std::vector<double> all(3);
            REEL_RETURN_IF_ERROR(c->AllGather(std::as_bytes(std::span<const double>(&mine, 1)),
                                              std::as_writable_bytes(std::span<double>(all)),
                                              NoDeadline()));
          }
          c.reset();
          return Status::Ok();
        }
        return opt->Step(0.1f);
      }();
      return end;
    });
    EXPECT_TRUE(ends[2].status.ok()) << ends[2].status;
    // Rank 0 receives from rank 2 in the ring and in the agreement: it sees rank 2 gone. Rank 1
    // may wait for rank 0 instead, which stopped: then its deadline ends the step.
    const Status& first = ends[0].status;
    EXPECT_EQ(first.code(), StatusCode::kUnavailable) << first;
    EXPECT_THAT(first.message(), HasSubstr("rank 2")) << first;
    EXPECT_THAT(first.message(),
                HasSubstr(after_reduce_scatter ? "all-gathering" : "reduce-scattering"))
        << first;
    for (int r : {0, 1}) {
      const Status& s = ends[static_cast<size_t>(r)].status;
      EXPECT_FALSE(s.ok()) << "rank " << r;
      EXPECT_THAT(s.message(), HasSubstr("step 2")) << s;
    }
  }
}

// zero_stage 1 reduce-scatters after backward: it takes no gradient ranges during backward, so
// the trainer keeps the model's reports away, whatever bucket_mb says; stage 0 takes them.
TEST(ShardedUpdate, TakesNoGradientsDuringBackward) {
  for (const char* stage : {"0", "1"}) {
    auto comms = testing::InprocRingGroup(2);
    std::vector<RankEnd> ends = OnThreads(comms, [&](int, std::unique_ptr<Communicator>& c) {
      RankEnd end;
      ParamArena arena;
      DeclareSharded(arena, 300);
      end.status = [&]() -> Status {
        REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(SyncOptimizerOptions(),
                                                      {{"zero_stage", stage}, {"bucket_mb", "4"}}));
        REEL_ASSIGN_OR_RETURN(auto opt, MakeSyncOptimizer(o));
        REEL_RETURN_IF_ERROR(opt->Setup(arena, *c));
        const bool takes = opt->gradient_sink() != nullptr;
        if (takes != (std::string(stage) == "0"))
          return InternalError(std::string("zero_stage ") + stage +
                               (takes ? " takes" : " does not take") + " gradients in backward");
        return opt->Step(0.1f);
      }();
      return end;
    });
    for (const RankEnd& e : ends) EXPECT_TRUE(e.status.ok()) << e.status;
  }
}

TEST(ShardedUpdate, MisuseIsRefusedWithAReason) {
  Result<Options> bad = ParseOptions(SyncOptimizerOptions(), {{"zero_stage", "2"}});
  ASSERT_TRUE(bad.ok());
  Result<std::unique_ptr<Optimizer>> two = MakeSyncOptimizer(*bad);
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(two.status().message(), HasSubstr("zero_stage"));
  // The lead's SaveState() without GatherState() on every rank: refused, the run goes on.
  auto comms = testing::InprocRingGroup(2);
  std::vector<RankEnd> ends = OnThreads(comms, [&](int rank, std::unique_ptr<Communicator>& c) {
    RankEnd end;
    ParamArena arena;
    DeclareSharded(arena, 40);
    end.status = [&]() -> Status {
      REEL_ASSIGN_OR_RETURN(Options o, ParseOptions(SyncOptimizerOptions(), {{"zero_stage", "1"}}));
      REEL_ASSIGN_OR_RETURN(auto opt, MakeSyncOptimizer(o));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, *c));
      REEL_RETURN_IF_ERROR(opt->Step(0.1f));
      if (rank == 0) {
        Result<std::string> early = opt->SaveState();
        if (early.status().code() != StatusCode::kFailedPrecondition ||
            early.status().message().find("GatherState") == std::string::npos)
          return InternalError("SaveState without GatherState: " + early.status().ToString());
      }
      REEL_RETURN_IF_ERROR(opt->GatherState());
      REEL_RETURN_IF_ERROR(opt->Step(0.1f));  // a step makes the gathered state stale
      if (rank == 0 && opt->SaveState().status().code() != StatusCode::kFailedPrecondition)
        return InternalError("SaveState after a step since GatherState was not refused");
      REEL_RETURN_IF_ERROR(opt->GatherState());
      if (rank == 0) {
        REEL_RETURN_IF_ERROR(opt->SaveState().status());
        // Taken once (the lead does not keep a whole state beyond its checkpoint).
        if (opt->SaveState().status().code() != StatusCode::kFailedPrecondition)
          return InternalError("a second SaveState after one GatherState was not refused");
      }
      // A state for another model (moments of another size) is refused on every rank.
      const std::string foreign =
          std::string("RSYN") + std::string("\x01\0\0\0\x04\0\0\0", 8) + "adam" +
          UpdateRule::EncodeState(1, std::vector<float>(7), std::vector<float>(7));
      Status s = opt->RestoreState(foreign);
      if (s.code() != StatusCode::kInvalidArgument)
        return InternalError("a foreign state: " + s.ToString());
      return opt->Step(0.1f);  // still usable
    }();
    return end;
  });
  ExpectOk(ends, "misuse");
}

}  // namespace
}  // namespace reel::core
