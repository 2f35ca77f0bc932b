// `reel train --resume` on another number of local ranks (trainer.local_ranks 2 -> 3 and 3 -> 2),
// with the real tfrecord source and a real model: the resumed run finishes the epoch having
// trained on exactly the number of videos the data holds (the core's reshard tests check the
// ids one by one).
#include <gtest/gtest.h>

#include <filesystem>

#include "e2e_util.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

constexpr int kVideos = 90, kBatch = 8;

void ResumeOnOtherRanks(int before, int after) {
  const std::string dir = ScratchDir("resume_" + std::to_string(before) + std::to_string(after));
  RunResult r = Reel({"synth", "--out", dir + "/data", "--videos", std::to_string(kVideos),
                      "--classes", "16", "--level", "video", "--shards", "3", "--seed", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  WriteFile(dir + "/run.pbtxt", R"(
data {
  name: "tfrecord"
  options { key: "files" value: ")" +
                                    dir + R"(/data/*.tfrecord" }
  options { key: "level" value: "video" }
  options { key: "shuffle_buffer" value: "16" }
}
model { name: "logistic" }
trainer {
  batch_size: )" + std::to_string(kBatch) +
                                    R"(
  seed: 1
  num_classes: 16
  checkpoint_dir: ")" + dir + R"(/ckpt"
}
)");
  const std::string config = dir + "/run.pbtxt";
  r = Reel({"train", "--config", config, "--set", "trainer.steps=2", "--set",
            "trainer.local_ranks=" + std::to_string(before)});
  ASSERT_EQ(r.code, 0) << r.err;
  const int first = 2 * kBatch * before;
  EXPECT_NE(r.out.find("trained 2 steps (" + std::to_string(first) + " examples, epoch 0)"),
            std::string::npos)
      << r.out;

  r = Reel({"train", "--config", config, "--resume", "--set", "trainer.epochs=1", "--set",
            "trainer.local_ranks=" + std::to_string(after)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("resumed from"), std::string::npos) << r.err;
  // What was left, split evenly; a rank one record short joins the last step.
  const int steps = 2 + (kVideos - first + after * kBatch - 1) / (after * kBatch);
  EXPECT_NE(r.out.find("trained " + std::to_string(steps) + " steps (" + std::to_string(kVideos) +
                       " examples, epoch 1)"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

TEST(ResumeRanksTest, TwoLocalRanksResumeOnThree) { ResumeOnOtherRanks(2, 3); }
TEST(ResumeRanksTest, ThreeLocalRanksResumeOnTwo) { ResumeOnOtherRanks(3, 2); }

}  // namespace
}  // namespace reel::e2e
