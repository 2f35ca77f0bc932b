// Every bundled plugin's README.md documents exactly the options its components declare, by the
// check `reel plugins check --readme` runs (core::CheckReadmeOptions: the backquoted names in the
// first column of the option tables against the schemas); the templates are held to it by their
// own `reel plugins check` (reel_add_plugin_check passes their README.md). Shown here too: the
// check names what is missing and what is extra. Plugins not built here (REEL_PLUGINS) are skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../common/reel_cli.h"
#include "reel/core/conformance.h"
#include "reel/core/host.h"

namespace {

namespace fs = std::filesystem;
using reel::cli_testing::Bundled;

// The outcome of the README check on `plugin_file` with README text `readme`.
reel::core::CheckOutcome CheckReadme(const std::string& plugin_file, const std::string& readme) {
  reel::core::HostOptions options;
  options.plugin_files = {plugin_file};
  options.load_plugins = false;
  auto host = reel::core::Host::Create(options);
  EXPECT_TRUE(host.ok()) << host.status();
  reel::core::CheckOutcome outcome;
  if (!host.ok()) return outcome;
  reel::core::CheckReadmeOptions((*host)->plugins().loaded().front(), (*host)->registry(), readme,
                                 "README.md",
                                 [&](const reel::core::CheckOutcome& o) { outcome = o; });
  return outcome;
}

TEST(PluginReadmeTest, OptionTablesMatchTheSchemas) {
  int checked = 0;
  for (const auto& dir : fs::directory_iterator(REEL_SOURCE_DIR "/plugins")) {
    const std::string plugin = dir.path().filename().string();
    if (!fs::exists(Bundled(plugin))) continue;
    const fs::path readme = dir.path() / "README.md";
    ASSERT_TRUE(fs::exists(readme)) << plugin << " has no README.md";
    std::ostringstream text;
    text << std::ifstream(readme).rdbuf();
    const reel::core::CheckOutcome o = CheckReadme(Bundled(plugin), text.str());
    EXPECT_TRUE(o.status.ok()) << readme << ": " << o.status;
    EXPECT_FALSE(o.skipped);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no bundled plugin built";
}

// On the tfrecord plugin's README with one row taken out and one made up: both are named.
TEST(PluginReadmeTest, MissingAndExtraOptionsAreNamed) {
  if (!fs::exists(Bundled("tfrecord"))) GTEST_SKIP() << "tfrecord plugin not built";
  std::ifstream in(REEL_SOURCE_DIR "/plugins/tfrecord/README.md");
  std::string text, line;
  while (std::getline(in, line))
    if (line.rfind("| `batch_size`", 0) != 0) text += line + "\n";
  text += "\n| option | default | meaning |\n|---|---|---|\n| `no_such_option` | 1 | made up |\n";
  const reel::core::CheckOutcome o = CheckReadme(Bundled("tfrecord"), text);
  EXPECT_EQ(o.status.code(), reel::StatusCode::kInvalidArgument) << o.status;
  EXPECT_NE(o.status.message().find("README.md: declared but not in a table whose header starts "
                                    "with '| option': batch_size"),
            std::string::npos)
      << o.status;
  EXPECT_NE(o.status.message().find("documented but declared by no component: no_such_option"),
            std::string::npos)
      << o.status;
}

// A default the table states as one value must be the schema's; a described one is not compared.
TEST(PluginReadmeTest, AStatedDefaultThatDiffersFromTheSchemaIsNamed) {
  if (!fs::exists(Bundled("tfrecord"))) GTEST_SKIP() << "tfrecord plugin not built";
  std::ifstream in(REEL_SOURCE_DIR "/plugins/tfrecord/README.md");
  std::string text, line;
  while (std::getline(in, line)) {
    if (line.rfind("| `batch_size` | 32 |", 0) == 0) line = "| `batch_size` | `64` | changed |";
    if (line.rfind("| `shuffle_buffer` | 0 |", 0) == 0)
      line = "| `shuffle_buffer` | none unless set | described, not compared |";
    text += line + "\n";
  }
  const reel::core::CheckOutcome o = CheckReadme(Bundled("tfrecord"), text);
  EXPECT_EQ(o.status.code(), reel::StatusCode::kInvalidArgument) << o.status;
  EXPECT_NE(o.status.message().find("default differs: batch_size says 64, the schema 32"),
            std::string::npos)
      << o.status;
  EXPECT_EQ(o.status.message().find("shuffle_buffer"), std::string::npos) << o.status;
}

}  // namespace
