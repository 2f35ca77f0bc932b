// The reel command against a real S3 server (s3rver on loopback, started by the test): synthetic
// data written to s3://, a config read from s3://, checkpoints written there, with the s3
// storage's options given as --storage flags, as REEL_STORAGE_S3_* variables or in the config.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "e2e_util.h"
#include "s3_storage.h"
#include "s3_test_env.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

class S3CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status error;
    server_ = s3::testing::SharedS3rver(&error);
    ASSERT_NE(server_, nullptr) << "cannot start the S3 test server: " << error;
  }

  // The options that reach s3rver: its endpoint and built-in account, path-style addressing.
  std::vector<std::pair<std::string, std::string>> Options() const {
    return {{"endpoint", server_->endpoint()},
            {"addressing", "path"},
            {"region", "us-east-1"},
            {"access_key_id", "S3RVER"},
            {"secret_access_key", "S3RVER"}};
  }
  std::vector<std::string> StorageFlags() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : Options()) out.insert(out.end(), {"--storage", "s3." + k + "=" + v});
    return out;
  }
  std::string StorageSection() const {
    std::string out = "storage { name: \"s3\"";
    for (const auto& [k, v] : Options())
      out += " options { key: \"" + k + "\" value: \"" + v + "\" }";
    return out + " }\n";
  }

  // Writes synthetic video-level data under `prefix` (through `reel synth` with --storage flags)
  // and returns a logistic-model config over it that checkpoints to `prefix`/ckpt.
  std::string MakeRun(const std::string& prefix) {
    std::vector<std::string> synth = StorageFlags();
    synth.insert(synth.end(), {"synth", "--out", prefix + "/data", "--videos", "64", "--classes",
                               "8", "--level", "video", "--shards", "2", "--seed", "5"});
    RunResult r = Reel(synth);
    EXPECT_EQ(r.code, 0) << r.err;
    return "data { name: \"tfrecord\" options { key: \"files\" value: \"" + prefix +
           "/data/*.tfrecord\" } options { key: \"level\" value: \"video\" } }\n"
           "model { name: \"logistic\" }\n"
           "trainer { steps: 2 batch_size: 16 num_classes: 8 checkpoint_dir: \"" +
           prefix + "/ckpt\" }\n";
  }

  // REEL_STORAGE_S3_<OPTION> for each of Options(): set to its value, or unset.
  void SetVariables(bool set) const {
    for (const auto& [k, v] : Options()) {
      std::string name = "REEL_STORAGE_S3_" + k;
      for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (set)
        ::setenv(name.c_str(), v.c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

  // A successful 2-step run of MakeRun(prefix)'s config, its checkpoint on S3.
  static void ExpectTrained(const RunResult& r, const std::string& prefix) {
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("checkpoint: " + prefix + "/ckpt/ckpt-0000000002.reelckpt"),
              std::string::npos)
        << r.out;
  }

  void Upload(const std::string& uri, const std::string& text) {
    auto storage = s3::MakeS3Storage(server_->Config());
    ASSERT_TRUE(storage.ok()) << storage.status();
    ASSERT_TRUE(WriteAll(**storage, uri, text).ok());
  }

  s3::testing::S3rverProcess* server_ = nullptr;
};

const std::string kBucket = std::string("s3://") + s3::testing::kBucket;

TEST_F(S3CliTest, ConfigOnS3WithStorageFlags) {
  const std::string prefix = kBucket + "/flags";
  Upload(prefix + "/run.pbtxt", MakeRun(prefix));
  std::vector<std::string> train = StorageFlags();
  train.insert(train.end(), {"train", "--config", prefix + "/run.pbtxt"});
  ExpectTrained(Reel(train), prefix);
}

TEST_F(S3CliTest, ConfigOnS3WithStorageVariables) {
  const std::string prefix = kBucket + "/env";
  Upload(prefix + "/run.pbtxt", MakeRun(prefix));
  SetVariables(true);
  RunResult r = Reel({"train", "--config", prefix + "/run.pbtxt"});
  SetVariables(false);
  ExpectTrained(r, prefix);
}

// A local config's storage section reaches s3rver by itself; a --storage flag for the same
// option wins over it (here: an endpoint nothing listens on, so the run must fail there).
TEST_F(S3CliTest, ConfigStorageSectionAndFlagsWinOverIt) {
  const std::string prefix = kBucket + "/section";
  const std::string dir = ScratchDir("s3_section");
  WriteFile(dir + "/run.pbtxt", MakeRun(prefix) + StorageSection());
  ExpectTrained(Reel({"train", "--config", dir + "/run.pbtxt"}), prefix);

  RunResult flag = Reel({"--storage", "s3.endpoint=http://127.0.0.1:1", "--storage",
                         "s3.max_retries=0", "train", "--config", dir + "/run.pbtxt"});
  EXPECT_EQ(flag.code, 75) << flag.err;  // Unavailable (docs/distributed.md, "Restarts")
  EXPECT_NE(flag.err.find("Failed to connect to 127.0.0.1 port 1"), std::string::npos) << flag.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace reel::e2e
