// The reel command as a user runs it: `reel plugins` lists what was found and why files were
// rejected, plugin commands dispatch, and mistakes get one clear line and a non-zero exit.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "../common/reel_cli.h"
#include "reel/plugin.h"

namespace {

using reel::cli_testing::CliRun;
using reel::cli_testing::Reel;

const std::string kDir = REEL_TEST_PLUGIN_DIR;

TEST(ReelCliTest, PluginsListsFoundPluginsAndRejectedFiles) {
  CliRun r = Reel("--plugin-dir " + kDir + "/good --plugin-dir " + kDir + "/bad_1 --plugin-dir " +
                  kDir + "/no_entry plugins");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("good 1.2.3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model echo_model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("storage file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("libreel_test_bad_descriptor_1.so: built for plugin ABI version 999"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("libreel_test_no_entry.so: not a reel plugin"), std::string::npos)
      << r.output;
}

TEST(ReelCliTest, PluginsShowPrintsTheOptionSchema) {
  CliRun r = Reel("--plugin-dir " + kDir + "/good plugins show echo_model");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("scale"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("multiplier"), std::string::npos) << r.output;
  CliRun missing = Reel("plugins show nothing_here");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("no plugin or component named 'nothing_here'"), std::string::npos)
      << missing.output;
}

TEST(ReelCliTest, PluginCommandsDispatch) {
  CliRun r = Reel("--plugin-dir " + kDir + "/good hello reel");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "hello reel\n");
  CliRun bad = Reel("--plugin-dir " + kDir + "/good hello a b");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("usage: reel hello [NAME"), std::string::npos) << bad.output;
}

// A plugin command that was interrupted exits like an interrupted core command (`reel train`).
TEST(ReelCliTest, InterruptedPluginCommandExits130) {
  CliRun r = Reel("--plugin-dir " + kDir + "/good hello --as-if-interrupted");
  EXPECT_EQ(r.exit_code, 130) << r.output;
  EXPECT_EQ(r.output, "reel hello: CANCELLED: stopped before greeting\n");
}

// `reel launch -- reel ...` gives the ranks the global flags it got: the plugin directory (else
// `hello` would be unknown) and the storage options, which win over REEL_STORAGE_* variables in
// the ranks as they do in launch itself; the variables reach the ranks with the environment.
TEST(ReelCliTest, LaunchGivesReelRanksItsPluginDirsAndStorageOptions) {
  const std::string launch = "--plugin-dir " + kDir + "/good ";
  const std::string ranks = "launch -n 2 -- reel hello --from-storage";
  CliRun plain = Reel(launch + ranks);
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("[rank 1] hello world\n"), std::string::npos) << plain.output;

  ::setenv("REEL_STORAGE_GREETING_NAME", "from_environment", 1);
  CliRun from_env = Reel(launch + ranks);
  CliRun flag = Reel(launch + "--storage greeting.name=from_flag " + ranks);
  ::unsetenv("REEL_STORAGE_GREETING_NAME");
  for (const char* rank : {"[rank 0] ", "[rank 1] "}) {
    EXPECT_NE(from_env.output.find(rank + std::string("hello from_environment\n")),
              std::string::npos)
        << from_env.output;
    EXPECT_NE(flag.output.find(rank + std::string("hello from_flag\n")), std::string::npos)
        << flag.output;
  }
  EXPECT_EQ(flag.exit_code, 0) << flag.output;
}

// `reel train` loads the plugin_dirs of its config (here one whose plugin is refused, so the
// command fails naming it) before anything else.
TEST(ReelCliTest, TrainLoadsTheConfigsPluginDirs) {
  const std::string dir = ::testing::TempDir() + "/reel_cli_plugin_dirs";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/run.pbtxt") << "plugin_dirs: \"" << kDir << "/bad_1\"\n";
  CliRun r = Reel("train --config " + dir + "/run.pbtxt --print-config");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(dir + "/run.pbtxt:1: plugin directory '" + kDir + "/bad_1'"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("built for plugin ABI version 999"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(ReelCliTest, UnknownCommandsAreOneClearLine) {
  CliRun r = Reel("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos) << r.output;
}

TEST(ReelCliTest, VersionAndHelp) {
  CliRun v = Reel("version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.output.find("plugin ABI " + std::to_string(reel::kPluginAbiVersion)),
            std::string::npos)
      << v.output;
  CliRun h = Reel("--help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.output.find("plugins"), std::string::npos) << h.output;
}

}  // namespace
