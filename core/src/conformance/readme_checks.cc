// A plugin's README against its components' option schemas (reel/core/conformance.h): what
// `reel plugins check --readme` and the bundled plugins' README test both run.
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "checks.h"

namespace reel::core {
namespace {

// The rows of the option tables: those that follow a header row starting with "| option", up to
// the first line that is not a table row. Each row's backquoted names in its first column, and
// its second column (the default) when the header names one.
struct OptionRow {
  std::vector<std::string> names;
  std::string default_cell;  // empty when the table has no default column
};

std::vector<OptionRow> OptionRows(std::string_view readme) {
  std::vector<OptionRow> rows;
  std::istringstream in{std::string(readme)};
  bool in_table = false, has_default = false;
  const std::regex quoted("`([A-Za-z0-9_.-]+)`");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| option", 0) == 0) {
      in_table = true;
      has_default = line.rfind("| option | default", 0) == 0;
    } else if (line.rfind("|", 0) != 0) {
      in_table = false;
    } else if (in_table && line.rfind("|---", 0) != 0) {
      const size_t bar = line.find('|', 1);
      const std::string first = line.substr(1, bar - 1);
      OptionRow row;
      for (std::sregex_iterator it(first.begin(), first.end(), quoted), end; it != end; ++it)
        row.names.push_back((*it)[1]);
      if (has_default && bar != std::string::npos) {
        const size_t next = line.find('|', bar + 1);
        row.default_cell = line.substr(bar + 1, next == std::string::npos ? next : next - bar - 1);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

// A default cell that states one literal value (`false`, 1000, `tcp`), backquotes and spaces
// around it taken off; empty for a description ("$REEL_SECRET", "(the transport's)", "256 MiB").
std::string LiteralDefault(std::string cell) {
  static const std::regex literal(" *`?(-?[A-Za-z0-9_.]+)`? *");
  std::smatch m;
  return std::regex_match(cell, m, literal) ? m[1].str() : std::string();
}

// "a, b" of the names in `from` that `without` lacks.
std::string Missing(const std::set<std::string>& from, const std::set<std::string>& without) {
  std::string out;
  for (const std::string& n : from)
    if (!without.count(n)) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void CheckReadmeOptions(const LoadedPlugin& plugin, const Registry& registry,
                        std::string_view readme, const std::string& readme_name,
                        const CheckSink& sink) {
  std::map<std::string, std::set<std::string>> defaults;  // option -> its components' defaults
  for (const ComponentEntry* e : registry.ListAll())
    if (e->provider_path == plugin.path)
      for (const OptionSpec& o : e->info.options) defaults[o.name].insert(o.default_value);
  std::set<std::string> declared, documented;
  for (const auto& [name, values] : defaults) declared.insert(name);
  std::string wrong_defaults;
  for (const OptionRow& row : OptionRows(readme)) {
    documented.insert(row.names.begin(), row.names.end());
    const std::string said = LiteralDefault(row.default_cell);
    if (said.empty()) continue;
    for (const std::string& name : row.names) {
      auto it = defaults.find(name);
      if (it == defaults.end() || it->second.count(said)) continue;
      wrong_defaults += (wrong_defaults.empty() ? "" : ", ") + name + " says " + said +
                        ", the schema " + *it->second.begin();
    }
  }
  std::string problem;
  if (std::string m = Missing(declared, documented); !m.empty())
    problem = "declared but not in a table whose header starts with '| option': " + m;
  if (std::string m = Missing(documented, declared); !m.empty())
    problem += (problem.empty() ? "" : "; ") +
               std::string("documented but declared by no component: ") + m;
  if (!wrong_defaults.empty())
    problem += (problem.empty() ? "" : "; ") + std::string("default differs: ") + wrong_defaults;
  conformance_internal::Report(
      sink,
      "README: its option tables list exactly the options the components declare, with their "
      "defaults",
      problem.empty() ? Status::Ok() : InvalidArgumentError(readme_name + ": " + problem));
}

}  // namespace reel::core
