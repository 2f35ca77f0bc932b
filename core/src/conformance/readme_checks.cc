// A plugin's README against its components' option schemas (reel/core/conformance.h): what
// `reel plugins check --readme` and the bundled plugins' README test both run.
#include <regex>
#include <set>
#include <sstream>

#include "checks.h"

namespace reel::core {
namespace {

// The backquoted names in the first column of the option tables: rows that follow a header row
// starting with "| option", up to the first line that is not a table row.
std::set<std::string> DocumentedOptions(std::string_view readme) {
  std::set<std::string> names;
  std::istringstream in{std::string(readme)};
  bool in_table = false;
  const std::regex quoted("`([A-Za-z0-9_.-]+)`");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| option", 0) == 0) {
      in_table = true;
    } else if (line.rfind("|", 0) != 0) {
      in_table = false;
    } else if (in_table && line.rfind("|---", 0) != 0) {
      const std::string first = line.substr(1, line.find('|', 1) - 1);
      for (std::sregex_iterator it(first.begin(), first.end(), quoted), end; it != end; ++it)
        names.insert((*it)[1]);
    }
  }
  return names;
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
  std::set<std::string> declared;
  for (const ComponentEntry* e : registry.ListAll())
    if (e->provider_path == plugin.path)
      for (const OptionSpec& o : e->info.options) declared.insert(o.name);
  const std::set<std::string> documented = DocumentedOptions(readme);
  std::string problem;
  if (std::string m = Missing(declared, documented); !m.empty())
    problem = "declared but not in a table whose header starts with '| option': " + m;
  if (std::string m = Missing(documented, declared); !m.empty())
    problem += (problem.empty() ? "" : "; ") +
               std::string("documented but declared by no component: ") + m;
  conformance_internal::Report(
      sink, "README: its option tables list exactly the options the components declare",
      problem.empty() ? Status::Ok() : InvalidArgumentError(readme_name + ": " + problem));
}

}  // namespace reel::core
