// `reel demo` with a work directory whose name text-format protobuf would have to escape.
#include <gtest/gtest.h>

#include <filesystem>

#include "e2e_util.h"
#include "reel/core/config.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

// A quote, a backslash and a brace: each would end or corrupt a string pasted into the config.
std::string OddWorkdir() { return ScratchDir("demo") + "/say \"hi\" \\ {x}"; }

TEST(DemoTest, PrintedConfigKeepsTheWorkdirAsGiven) {
  const std::string dir = OddWorkdir();
  RunResult r = Reel({"demo", "--workdir", dir, "--print-config"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto cfg = core::ParseConfig(r.out, "printed config");
  ASSERT_TRUE(cfg.ok()) << cfg.status() << "\n" << r.out;
  EXPECT_EQ(cfg->config.trainer().checkpoint_dir(), dir + "/checkpoints");
  EXPECT_EQ(cfg->config.trainer().metrics_log(), dir + "/metrics.jsonl");
  EXPECT_EQ(cfg->config.trainer().tensorboard_dir(), dir + "/tensorboard");
  EXPECT_EQ(cfg->config.data().options().at("files"), dir + "/data/train/*.tfrecord");
  EXPECT_EQ(cfg->config.eval_data().options().at("files"), dir + "/data/test/*.tfrecord");
  fs::remove_all(fs::path(dir).parent_path());
}

TEST(DemoTest, RunsInAWorkdirWithQuotesAndBackslashes) {
  const std::string dir = OddWorkdir();
  RunResult r = Reel({"demo", "--workdir", dir, "--quiet", "--set", "trainer.steps=2", "--set",
                      "trainer.eval_every_steps=0", "--set", "trainer.checkpoint_every_steps=0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("held-out metrics (" + dir + "/data/test)"), std::string::npos) << r.out;
  EXPECT_EQ(ListDir(dir + "/checkpoints").size(), 1u);
  EXPECT_NE(ReadFile(dir + "/metrics.jsonl").find("\"step\""), std::string::npos);
  fs::remove_all(fs::path(dir).parent_path());
}

}  // namespace
}  // namespace reel::e2e
