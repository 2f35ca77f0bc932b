// Every bundled plugin's README.md documents exactly the options its components declare: the
// backquoted names in the first column of its option tables (a table whose header starts with
// "| option") against the names `reel plugins show PLUGIN` lists. A plugin without options says
// so and has no table. Plugins not built here (REEL_PLUGINS) are skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "../common/reel_cli.h"

namespace {

using reel::cli_testing::CliRun;
using reel::cli_testing::Reel;

// The option names in the first column of README's option tables.
std::set<std::string> DocumentedOptions(const std::filesystem::path& readme) {
  std::ifstream in(readme);
  std::set<std::string> names;
  bool in_table = false;
  const std::regex quoted("`([a-z0-9_]+)`");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| option", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    if (line.rfind("|---", 0) == 0) continue;
    const std::string first = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator it(first.begin(), first.end(), quoted), end; it != end; ++it)
      names.insert((*it)[1]);
  }
  return names;
}

// The option names `reel plugins show` lists for every component of the plugin: the first word
// of each schema line (indented six spaces).
std::set<std::string> DeclaredOptions(const std::string& show_output) {
  std::set<std::string> names;
  std::istringstream in(show_output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("      ", 0) != 0 || line.find("(no options)") != std::string::npos) continue;
    std::istringstream words(line);
    std::string name;
    words >> name;
    names.insert(name);
  }
  return names;
}

std::string Join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return "{" + out + "}";
}

TEST(PluginReadmeTest, OptionTablesMatchTheSchemas) {
  int checked = 0;
  for (const auto& dir : std::filesystem::directory_iterator(REEL_SOURCE_DIR "/plugins")) {
    const std::string plugin = dir.path().filename().string();
    if (!std::filesystem::exists(REEL_BINARY_DIR "/lib/reel/plugins/libreel_" + plugin + ".so"))
      continue;
    const std::filesystem::path readme = dir.path() / "README.md";
    ASSERT_TRUE(std::filesystem::exists(readme)) << plugin << " has no README.md";
    CliRun show = Reel("plugins show " + plugin);
    ASSERT_EQ(show.exit_code, 0) << show.output;
    const std::set<std::string> declared = DeclaredOptions(show.output);
    const std::set<std::string> documented = DocumentedOptions(readme);
    EXPECT_EQ(documented, declared) << readme << " documents " << Join(documented)
                                    << "; the plugin declares " << Join(declared);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no bundled plugin built";
}

}  // namespace
