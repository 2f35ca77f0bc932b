// The config and storage options as a user gives them: `--config` read through storage (local
// paths and file:// URIs), `--storage` flags, REEL_STORAGE_* variables and a config's `storage`
// sections, with every mistake a clear error naming where it came from.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "e2e_util.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

constexpr char kConfig[] = R"(model { name: "logistic" }
trainer { steps: 3 }
)";

TEST(StorageTest, ConfigIsReadThroughStorage) {
  const std::string dir = ScratchDir("config_uri");
  WriteFile(dir + "/run.pbtxt", kConfig);
  for (const std::string& path : {dir + "/run.pbtxt", "file://" + dir + "/run.pbtxt"}) {
    RunResult r = Reel({"train", "--config", path, "--print-config"});
    ASSERT_EQ(r.code, 0) << path << ": " << r.err;
    EXPECT_NE(r.out.find("steps: 3"), std::string::npos) << r.out;
  }
  RunResult missing = Reel({"train", "--config", dir + "/none.pbtxt"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("reading the config file " + dir + "/none.pbtxt"), std::string::npos)
      << missing.err;
  RunResult scheme = Reel({"train", "--config", "nowhere://bucket/run.pbtxt"});
  EXPECT_EQ(scheme.code, 1);
  EXPECT_NE(scheme.err.find("no storage serves 'nowhere://' URIs"), std::string::npos)
      << scheme.err;
  fs::remove_all(dir);
}

TEST(StorageTest, BadStorageFlagsAndVariablesAreClearErrors) {
  RunResult shape = Reel({"--storage", "endpoint=x", "version"});
  EXPECT_EQ(shape.code, 2);
  EXPECT_NE(shape.err.find("--storage endpoint=x: expected SCHEME.OPTION=VALUE"), std::string::npos)
      << shape.err;
  RunResult option = Reel({"--storage", "file.bogus=1", "version"});
  EXPECT_EQ(option.code, 1);
  EXPECT_NE(option.err.find("storage options for 'file'"), std::string::npos) << option.err;
  EXPECT_NE(option.err.find("bogus"), std::string::npos) << option.err;
  RunResult scheme = Reel({"--storage", "nowhere.endpoint=x", "version"});
  EXPECT_EQ(scheme.code, 1);
  EXPECT_NE(scheme.err.find("no storage named 'nowhere'"), std::string::npos) << scheme.err;

  ::setenv("REEL_STORAGE_FILE", "1", 1);
  RunResult env = Reel({"version"});
  ::unsetenv("REEL_STORAGE_FILE");
  EXPECT_EQ(env.code, 2);
  EXPECT_NE(env.err.find("environment variable REEL_STORAGE_FILE: expected "
                         "REEL_STORAGE_<SCHEME>_<OPTION>=VALUE"),
            std::string::npos)
      << env.err;
  ::setenv("REEL_STORAGE_FILE_BOGUS", "1", 1);
  RunResult env_option = Reel({"version"});
  ::unsetenv("REEL_STORAGE_FILE_BOGUS");
  EXPECT_EQ(env_option.code, 1);
  EXPECT_NE(env_option.err.find("bogus"), std::string::npos) << env_option.err;
}

TEST(StorageTest, ConfigStorageSectionsAreCheckedWithTheirLine) {
  const std::string dir = ScratchDir("config_storage");
  WriteFile(dir + "/bad_option.pbtxt", std::string(kConfig) +
                                           "storage { name: \"file\" options { key: \"bogus\" "
                                           "value: \"1\" } }\n");
  RunResult option = Reel({"train", "--config", dir + "/bad_option.pbtxt", "--print-config"});
  EXPECT_EQ(option.code, 1);
  EXPECT_NE(option.err.find(dir + "/bad_option.pbtxt:3: storage 'file'"), std::string::npos)
      << option.err;
  EXPECT_NE(option.err.find("bogus"), std::string::npos) << option.err;
  WriteFile(dir + "/bad_scheme.pbtxt", std::string(kConfig) + "storage { name: \"nowhere\" }\n");
  RunResult scheme = Reel({"train", "--config", dir + "/bad_scheme.pbtxt", "--print-config"});
  EXPECT_EQ(scheme.code, 1);
  EXPECT_NE(scheme.err.find("no storage named 'nowhere'"), std::string::npos) << scheme.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace reel::e2e
