// The capacity model's arithmetic on cases computed by hand (the sums are in the comments), and
// the inputs it refuses.
#include "plan/capacity_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

namespace reel::core::plan {
namespace {

using ::testing::HasSubstr;

// 1000 videos of 1 MB at 300 frames on local disk; 1M parameters (4 MB of gradients); batch 10.
// The node: 2 cores; 0.01 core-s to decode and 0.1 core-s to step one example. The gradient is
// reduced whole after backward (bucket_mb 0), and the step is not split, unless a test says so.
struct Case {
  Dataset data{.videos = 1000, .bytes = 1e9, .mean_frames = 300};
  Cluster cluster{.nodes = 2,
                  .cores_per_node = 2,
                  .link_bytes_per_s = 125e6,
                  .link_payload = 1,  // the sums below take the link's whole rate as payload
                  .link_latency_s = 0};
  Training training{.batch_per_rank = 10, .params = 1e6, .bucket_bytes = 0};
  Rates rates{.cores = 2,
              .decode_bytes_per_core = 1e8,
              .step_examples_per_core = 10,
              .forward_examples_per_core = 40,
              .frames = 300,
              .reduce_bytes = 1e9,
              .transfer_bytes = 1e9,
              .message_latency_s = 0,
              .apply_params_per_core = 1e7,
              .disk_read_bytes = 1e9,
              .disk_write_bytes = 2e8};
};

double PartOf(const Plan& p, const std::string& name) {
  for (const Part& part : p.parts)
    if (part.name == name) return part.seconds;
  ADD_FAILURE() << "no part " << name;
  return -1;
}

TEST(CapacityModelTest, SyncRingOnTwoNodes) {
  Case c;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // 500 examples per rank, 50 steps; decode 500 x 0.01 / 2 = 2.5 s, step 500 x 0.1 / 2 = 25 s;
  // exchange 50 x (2 x 1/2 x 4e6 B / 125e6 B/s) = 1.6 s; reading 500 MB / 1 GB/s = 0.5 s;
  // the prefetch thread 500 x 0.01 = 5 s. Epoch = 2.5 + 25 + 1.6 = 29.1 s.
  EXPECT_EQ(p->steps, 50);
  EXPECT_DOUBLE_EQ(PartOf(*p, "decoding"), 2.5);
  EXPECT_DOUBLE_EQ(PartOf(*p, "step"), 25);
  EXPECT_NEAR(PartOf(*p, "exchange"), 1.6, 1e-12);
  EXPECT_DOUBLE_EQ(PartOf(*p, "reading"), 0.5);
  EXPECT_NEAR(p->epoch_seconds, 29.1, 1e-9);
  EXPECT_EQ(p->bottleneck, "step");
  EXPECT_NEAR(p->examples_per_s, 1000 / 29.1, 1e-9);
  EXPECT_NEAR(p->node_hours, 29.1 * 2 / 3600, 1e-12);
  // One node alone: min(2 cores / 0.11 core-s, 1 GB/s / 1 MB, 1 / 0.01) = 18.18 examples/s.
  EXPECT_NEAR(p->scaling_efficiency, (1000 / 29.1) / (2 * 2 / 0.11), 1e-9);
  EXPECT_FALSE(p->assumptions.empty());
}

// The step of SyncRingOnTwoNodes (25 s, 0.5 s a step) measured as forward 30%, backward 50%,
// update 20%: step 20 s, update 5 s, 0.25 s of backward a step.
Case SplitCase() {
  Case c;
  c.rates.backward_fraction = 0.5;
  c.rates.update_fraction = 0.2;
  return c;
}

TEST(CapacityModelTest, BucketsHideTheExchangeUpToBackwardsShare) {
  Case c = SplitCase();
  c.training.bucket_bytes = 1048576;  // 4e6 B of gradient: 4 buckets, the last 0.262 of it
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // A step's exchange, 0.032 s, is under its 0.25 s of backward: what shows is the last bucket's,
  // 1048576 / 4e6 x 0.032 = 0.008388608 s a step, 0.4194304 s over 50 steps.
  EXPECT_DOUBLE_EQ(PartOf(*p, "step"), 20);
  EXPECT_DOUBLE_EQ(PartOf(*p, "update"), 5);
  EXPECT_NEAR(PartOf(*p, "exchange"), 0.4194304, 1e-12);
  EXPECT_NEAR(p->epoch_seconds, 2.5 + 20 + 5 + 0.4194304, 1e-9);
  EXPECT_EQ(p->bottleneck, "step");

  // At 10 MB/s a step's exchange is 0.4 s, + 4 buckets x 2 x 1 ms of latency = 0.408 s; backward
  // hides 0.25 s of it: 0.158 s a step (the last bucket's 0.1048576 + 0.002 s is less), 7.9 s.
  c.cluster.link_bytes_per_s = 1e7;
  c.cluster.link_latency_s = 1e-3;
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(PartOf(*p, "exchange"), 50 * 0.158, 1e-9);

  // bucket_mb 0: one message after backward, 0.4 + 0.002 s a step, none of it hidden.
  c.training.bucket_bytes = 0;
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(PartOf(*p, "exchange"), 50 * 0.402, 1e-9);
  EXPECT_NEAR(p->epoch_seconds, 2.5 + 20 + 5 + 50 * 0.402, 1e-9);
}

TEST(CapacityModelTest, TheShardedUpdateDividesTheUpdateNotTheBytes) {
  Case c = SplitCase();
  c.training.sharded_update = true;
  c.training.bucket_bytes = 4 * 1048576.0;  // not used: the reduce-scatter runs after backward
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // Update 5 s / 2 ranks; reduce-scatter + all-gather carry the allreduce's 0.032 s a step.
  EXPECT_DOUBLE_EQ(PartOf(*p, "update"), 2.5);
  EXPECT_NEAR(PartOf(*p, "exchange"), 1.6, 1e-12);
  EXPECT_NEAR(p->epoch_seconds, 2.5 + 20 + 2.5 + 1.6, 1e-9);
  EXPECT_THAT(p->assumptions, ::testing::Contains(HasSubstr("divides the update by 2")));

  c.cluster.nodes = 4;  // 250 examples, 25 steps: update 12.5 s x 0.2 / 4, exchange 2 x 3/4 x 32 ms
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(PartOf(*p, "update"), 0.625);
  EXPECT_NEAR(PartOf(*p, "exchange"), 25 * 0.048, 1e-12);
}

TEST(CapacityModelTest, CompressionHalvesTheBytesAndAddsAConversionPass) {
  Case c;
  c.training.compressed = true;
  c.rates.memory_bytes = 1.2e9;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // Half of the 0.032 s a step on the wire, + 3 x 4e6 B / 1.2e9 B/s = 0.01 s of conversion.
  EXPECT_NEAR(PartOf(*p, "exchange"), 50 * (0.016 + 0.01), 1e-12);

  c.rates.memory_bytes = 0;  // a profile without the copy rate
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("memory copy rate"));
  EXPECT_THAT(p.status().message(), HasSubstr("reel plan --measure"));
}

TEST(CapacityModelTest, OneRankExchangesNothing) {
  Case c = SplitCase();
  c.cluster.nodes = 1;
  c.training.bucket_bytes = 4 * 1048576.0;
  c.training.sharded_update = true;
  c.training.compressed = true;  // no copy rate needed: nothing is converted
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // 1000 examples, 100 steps: decoding 5 s; of the step's 50 s, 40 s forward and backward and
  // the whole update, 10 s.
  EXPECT_DOUBLE_EQ(PartOf(*p, "exchange"), 0);
  EXPECT_DOUBLE_EQ(PartOf(*p, "update"), 10);
  EXPECT_DOUBLE_EQ(PartOf(*p, "step"), 40);
  EXPECT_NEAR(p->epoch_seconds, 55, 1e-9);
}

TEST(CapacityModelTest, TheUpdateAndTheExposedExchangeArePartsOfTheirOwn) {
  Case c = SplitCase();
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> names;
  for (const Part& part : p->parts) names.push_back(part.name);
  EXPECT_THAT(names, ::testing::ElementsAre("reading", "decoding", "step", "update", "exchange",
                                            "evaluation", "checkpoints", "fill", "startup"));
  // The update can set the epoch: an update rule that takes 90% of the step.
  c.rates.backward_fraction = 0.05;
  c.rates.update_fraction = 0.9;
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->bottleneck, "update");
}

TEST(CapacityModelTest, AProfileWithoutTheStepsSplitPlansOnlyWhatNeedsNone) {
  Case c;  // backward_fraction and update_fraction -1: an older reel's profile
  c.training.bucket_bytes = 4 * 1048576.0;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("bucket_mb > 0"));
  EXPECT_THAT(p.status().message(), HasSubstr("measure again with `reel plan --measure`"));
  c.training.bucket_bytes = 0;
  c.training.sharded_update = true;
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("zero_stage 1"));
  // After backward, or on one node, it plans: the update counted in the step, as measured.
  c.training.sharded_update = false;
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(PartOf(*p, "step"), 25);
  EXPECT_DOUBLE_EQ(PartOf(*p, "update"), 0);
  EXPECT_THAT(p->assumptions, ::testing::Contains(HasSubstr("the update is counted in the step")));
}

TEST(CapacityModelTest, ASlowLinkMakesTheExchangeTheBottleneck) {
  Case c;
  c.cluster.nodes = 4;
  c.cluster.link_bytes_per_s = 1e6;  // 8 Mbit/s
  c.cluster.link_latency_s = 1e-3;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // 25 steps x (2 x 3/4 x 4e6 / 1e6 + 6 x 1 ms) = 25 x 6.006 = 150.15 s.
  EXPECT_EQ(p->steps, 25);
  EXPECT_NEAR(PartOf(*p, "exchange"), 150.15, 1e-9);
  EXPECT_EQ(p->bottleneck, "exchange");
}

TEST(CapacityModelTest, FramesScaleTheStepAndS3LimitsTheRead) {
  Case c;
  c.data.mean_frames = 150;  // half the profile's frames: half the step's cost
  c.data.storage = Storage::kS3;
  c.cluster.s3_bytes_per_s = 5e6;
  c.cluster.s3_connections = 2;
  c.rates.s3_bytes_per_connection = 4e6;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(PartOf(*p, "step"), 12.5);
  // min(5 MB/s per node, 2 x 4 MB/s, link 125 MB/s) = 5 MB/s: 500 MB in 100 s.
  EXPECT_DOUBLE_EQ(PartOf(*p, "reading"), 100);
  EXPECT_DOUBLE_EQ(p->epoch_seconds, 100);
  EXPECT_EQ(p->bottleneck, "reading");
}

TEST(CapacityModelTest, AsyncWorkersAndServers) {
  Case c;
  c.cluster.nodes = 3;
  c.training.async = true;
  c.training.servers = 1;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // A worker's step: decode 10 x 0.01 / 2 = 0.05, step 10 x 0.1 / 2 = 0.5, push+pull
  // 2 x 4e6 / 125e6 + 1e6 / (1e7 x 2 cores) = 0.064 + 0.05 = 0.114: 0.664 s. Two workers: 3.012
  // steps/s, under the server's link (125e6 / 4e6 = 31.25) and rule (2e7 / 1e6 = 20). 100 steps.
  EXPECT_NEAR(p->epoch_seconds, 100 * 0.664 / 2, 1e-9);
  EXPECT_EQ(p->steps, 50);
  EXPECT_NEAR(PartOf(*p, "exchange"), 50 * 0.114, 1e-9);
  EXPECT_EQ(p->bottleneck, "step");

  c.training.overlap = true;  // the exchange hides behind the step: 0.55 s per step
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->epoch_seconds, 100 * 0.55 / 2, 1e-9);
}

TEST(CapacityModelTest, TcpPayloadIsTheLinksRateLessItsHeaders) {
  // 1448 payload bytes in 1538 on the wire; 8949 in 9039 with jumbo frames.
  EXPECT_DOUBLE_EQ(PayloadFraction(1500), 1448.0 / 1538);
  EXPECT_DOUBLE_EQ(PayloadFraction(9001), 8949.0 / 9039);
  Case c;
  c.cluster.link_payload = PayloadFraction(1500);
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // The exchange of SyncRingOnTwoNodes, 1.6 s at the whole rate, over 1448/1538 of it.
  EXPECT_NEAR(PartOf(*p, "exchange"), 1.6 * 1538 / 1448, 1e-12);
}

TEST(CapacityModelTest, WholeFilesPerRankMakeTheBusiestRankSetTheEpoch) {
  Case c;
  c.cluster.nodes = 3;
  c.data.files = 4;  // 250 videos each: ranks 0, 1, 2 read files {0, 3}, {1}, {2}
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // Rank 0: 500 examples, 50 steps (the others join them); decode 2.5 s, step 25 s, reading
  // 0.5 s, exchange 50 x (2 x 2/3 x 4e6 / 125e6) = 2.1333 s. Epoch 29.6333 s.
  EXPECT_EQ(p->steps, 50);
  EXPECT_DOUBLE_EQ(PartOf(*p, "step"), 25);
  EXPECT_DOUBLE_EQ(PartOf(*p, "reading"), 0.5);
  EXPECT_NEAR(PartOf(*p, "exchange"), 50 * 2 * 2.0 / 3 * 4e6 / 125e6, 1e-12);
  EXPECT_NEAR(p->epoch_seconds, 27.5 + 50 * 2 * 2.0 / 3 * 4e6 / 125e6, 1e-9);

  c.data.files = 6;  // divides: 2 files of 166.67 videos each, 334 examples, 34 steps
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->steps, 34);
  EXPECT_DOUBLE_EQ(PartOf(*p, "step"), 334 * 0.1 / 2);

  c.data.files = 2;  // fewer files than ranks: each rank reads all 1 GB and keeps 334 videos
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->steps, 34);
  EXPECT_DOUBLE_EQ(PartOf(*p, "reading"), 1.0);
  EXPECT_DOUBLE_EQ(PartOf(*p, "step"), 334 * 0.1 / 2);
}

TEST(CapacityModelTest, AsyncEpochWaitsForTheBusiestWorker) {
  Case c;
  c.cluster.nodes = 4;  // 1 server, 3 workers
  c.training.async = true;
  c.data.files = 4;  // worker 0 reads 2 files: 500 videos, 50 steps
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // A worker's step is 0.664 s (AsyncWorkersAndServers); the job's 100 steps at 3 / 0.664 steps/s
  // would take 22.13 s, but worker 0 alone takes 50 x 0.664 = 33.2 s.
  EXPECT_EQ(p->steps, 50);
  EXPECT_NEAR(p->epoch_seconds, 50 * 0.664, 1e-9);
  EXPECT_EQ(p->bottleneck, "step");
}

TEST(CapacityModelTest, WorkersShareTheServerUntilTheBusiestIsLeftAlone) {
  Case c;
  c.cluster.nodes = 4;  // 1 server, 3 workers
  c.training.async = true;
  c.training.params = 1e7;              // 40 MB pushes
  c.rates.apply_params_per_core = 5e6;  // the server's rule: 1e7 / 1e7 = 1 step/s
  c.data.files = 4;                     // worker 0 takes 50 steps, workers 1 and 2 take 25
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // A worker alone: 0.05 + 0.5 + 2 x 4e7 / 125e6 + 1e7 / 1e7 = 2.19 s a step. While all three
  // run they share the server's 1 step/s: 25 steps each in 75 s. Then worker 0 is alone, at its
  // own rate: 25 x 2.19 s. Neither the job at the server's rate (100 s) nor worker 0 alone at
  // its own (109.5 s) is as long.
  EXPECT_NEAR(p->epoch_seconds, 75 + 25 * 2.19, 1e-9);
}

TEST(CapacityModelTest, ManyWorkersSaturateTheServer) {
  Case c;
  c.cluster.nodes = 9;
  c.training.async = true;
  c.training.params = 1e7;  // 40 MB pushes
  c.data.videos = 10000;
  c.data.bytes = 1e10;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // Workers alone: 8 / (0.55 + 0.64 + 0.5) = 4.73 steps/s; the server's rule: 2e7 / 1e7 = 2.
  EXPECT_EQ(p->bottleneck, "servers' update rule");
  EXPECT_NEAR(p->epoch_seconds, 1000 / 2.0, 1e-9);
}

TEST(CapacityModelTest, EvaluationAndCheckpointsAddTheirTime) {
  Case c;
  c.data.eval_videos = 200;
  c.training.checkpoints_per_epoch = 2;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // 100 eval videos per rank x (0.01 + 1/40) core-s / 2 cores = 1.75 s; checkpoints
  // 2 x 1e6 x 4 x 3 B / 2e8 B/s = 0.12 s.
  EXPECT_NEAR(PartOf(*p, "evaluation"), 1.75, 1e-12);
  EXPECT_NEAR(PartOf(*p, "checkpoints"), 0.12, 1e-12);
  EXPECT_NEAR(p->epoch_seconds, 29.1 + 1.75 + 0.12, 1e-9);
}

TEST(CapacityModelTest, StartupIsPaidOnceAndNamesTheBottleneckOnlyWhenItIsTheEpoch) {
  Case c;
  c.rates.startup_seconds = 0.9;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  // 29.1 s of training (SyncRingOnTwoNodes) + 0.9 s once = 30.0 s; the step still sets it, and
  // the job's examples/s are the training's (1000 / 29.1), not diluted by the startup.
  EXPECT_DOUBLE_EQ(PartOf(*p, "startup"), 0.9);
  EXPECT_NEAR(p->epoch_seconds, 30.0, 1e-9);
  EXPECT_EQ(p->bottleneck, "step");
  EXPECT_NEAR(p->examples_per_s, 1000 / 29.1, 1e-9);
  EXPECT_THAT(p->assumptions.back(), HasSubstr("startup: 0.90 s once per run"));
  // Async: 0.9 s on top of the same workers' time as without it.
  c.training.async = true;
  c.training.servers = 1;
  c.cluster.nodes = 3;
  Result<Plan> with = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  c.rates.startup_seconds = 0;
  Result<Plan> without = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_NEAR(with->epoch_seconds - without->epoch_seconds, 0.9, 1e-9);
  EXPECT_DOUBLE_EQ(PartOf(*without, "startup"), 0);
}

TEST(CapacityModelTest, AnEpochsFirstBatchWaitsForTheShuffleBuffersFillOnEveryRank) {
  Case c;  // 2 nodes of 500 videos each, batch 10
  Result<Plan> none = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  c.rates.fill_seconds_per_record = 0.002;
  c.training.shuffle_buffer = 90;
  Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(none.ok() && p.ok()) << p.status();
  // The buffer and the first batch: 100 records at 2 ms, beside nothing, once per epoch; the
  // training's rate is not diluted by it.
  EXPECT_DOUBLE_EQ(PartOf(*none, "fill"), 0);
  EXPECT_NEAR(PartOf(*p, "fill"), 0.2, 1e-12);
  EXPECT_NEAR(p->epoch_seconds - none->epoch_seconds, 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(p->examples_per_s, none->examples_per_s);
  EXPECT_THAT(p->assumptions,
              ::testing::Contains(HasSubstr("fill: before an epoch's first batch")));
  // A buffer larger than a rank's share holds the share: every record is read before step 1.
  c.training.shuffle_buffer = 100000;
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(PartOf(*p, "fill"), 500 * 0.002, 1e-12);
  // On one node the share is every video.
  c.cluster.nodes = 1;
  p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(PartOf(*p, "fill"), 1000 * 0.002, 1e-12);
}

TEST(CapacityModelTest, ImpossibleInputsAreRefusedNamingThem) {
  struct Bad {
    std::function<void(Case&)> change;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {[](Case& c) { c.cluster.nodes = 0; }, "at least 1 node"},
      {[](Case& c) { c.cluster.link_bytes_per_s = 0; }, "link rate per node"},
      {[](Case& c) { c.cluster.cores_per_node = 0; }, "cores per node"},
      {[](Case& c) { c.data.videos = 15; }, "smaller than one batch of every training rank"},
      {[](Case& c) { c.training.batch_per_rank = 0; }, "batch per rank"},
      {[](Case& c) {
         c.training.async = true;
         c.training.servers = 2;
       },
       "leaves no worker"},
      {[](Case& c) { c.data.storage = Storage::kS3; }, "S3 bandwidth per node"},
      {[](Case& c) { c.rates.step_examples_per_core = 0; }, "step rate"},
      {[](Case& c) { c.data.files = -1; }, "file count"},
      {[](Case& c) { c.cluster.link_payload = PayloadFraction(40); }, "payload share"},
      {[](Case& c) { c.data.files = 1001; }, "a file holds at least one"},
      {[](Case& c) { c.rates.startup_seconds = -1; }, "startup must be 0 or more seconds"},
      {[](Case& c) { c.rates.fill_seconds_per_record = -1; }, "fill must be 0 or more seconds"},
      {[](Case& c) { c.training.shuffle_buffer = -1; }, "shuffle buffer cannot be negative"},
      {[](Case& c) { c.training.bucket_bytes = -1; }, "bucket size cannot be negative"},
      {[](Case& c) {
         c.rates.backward_fraction = 0.7;
         c.rates.update_fraction = 0.4;
       },
       "add up to more than 1"},
  };
  for (const Bad& b : bad) {
    Case c;
    b.change(c);
    Result<Plan> p = PlanEpoch(c.data, c.cluster, c.training, c.rates);
    ASSERT_FALSE(p.ok()) << b.says;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr(b.says));
  }
}

TEST(CapacityModelTest, SizesAndRatesWithUnits) {
  EXPECT_DOUBLE_EQ(*ParseBytes("1.5TB"), 1.5e12);
  EXPECT_DOUBLE_EQ(*ParseBytes("4GiB"), 4.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(*ParseBytes("123"), 123);
  EXPECT_DOUBLE_EQ(*ParseRate("750Mbit/s"), 750e6 / 8);
  EXPECT_DOUBLE_EQ(*ParseRate("10Gbit/s"), 1.25e9);
  EXPECT_DOUBLE_EQ(*ParseRate("100MB/s"), 1e8);
  EXPECT_DOUBLE_EQ(*ParseRate("1Gbps"), 1.25e8);
  EXPECT_DOUBLE_EQ(*ParseRate("100mbit/s"), 12.5e6);  // as tc writes it
  for (const char* bad : {"", "TB", "1.5TX", "-3GB", "10 furlongs"})
    EXPECT_EQ(ParseBytes(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  for (const char* bad : {"", "100MB", "10Gbit", "fast"})
    EXPECT_EQ(ParseRate(bad).status().code(), StatusCode::kInvalidArgument) << bad;
}

}  // namespace
}  // namespace reel::core::plan
