// PluginLoader: finds plugin libraries, checks their descriptors and registers their components.
//
// Search order (first wins when two files carry the same plugin name): the --plugin-dir
// directories, then REEL_PLUGIN_PATH (':'-separated), then the install's lib/reel/plugins beside
// the executable (<exe>/../lib/reel/plugins). Every file is either loaded or rejected with a
// one-line reason (not a shared library, no entry symbol, another ABI/SDK/runtime, a duplicate
// component naming both files); nothing crashes and nothing is half-registered.
//
// Thread-safety: single-threaded, at start-up.
#ifndef REEL_CORE_PLUGIN_LOADER_H_
#define REEL_CORE_PLUGIN_LOADER_H_

#include <string>
#include <vector>

#include "reel/core/registry.h"
#include "reel/status.h"

namespace reel::core {

// A plugin that was loaded and registered, as `reel plugins` lists it.
struct LoadedPlugin {
  std::string path;
  std::string name, version, description, sdk_version, build_tag;
  std::vector<std::string> components;  // "model bilstm_video", ...
};

// A file the loader refused, and why (another ABI, not a plugin, a name taken, ...).
struct RejectedFile {
  std::string path;
  std::string reason;  // one line
};

// Loads plugin files into a Registry by the rules above; what it loaded and what it refused stay
// listed for `reel plugins`.
class PluginLoader {
 public:
  explicit PluginLoader(Registry& registry) : registry_(registry) {}

  // Loads one file; on failure returns the reason (and records it in rejected()).
  Status LoadFile(const std::string& path);
  // Loads every *.so in `dir` (sorted). A missing directory is skipped silently.
  void LoadDirectory(const std::string& dir);
  // LoadDirectory over DefaultSearchPath(...).
  void LoadSearchPath(const std::vector<std::string>& plugin_dirs);

  const std::vector<LoadedPlugin>& loaded() const { return loaded_; }
  const std::vector<RejectedFile>& rejected() const { return rejected_; }

  // --plugin-dir entries, then REEL_PLUGIN_PATH, then <exe dir>/../lib/reel/plugins.
  static std::vector<std::string> DefaultSearchPath(const std::vector<std::string>& plugin_dirs);

 private:
  Status Reject(const std::string& path, Status why);
  Registry& registry_;
  std::vector<LoadedPlugin> loaded_;
  std::vector<RejectedFile> rejected_;
  std::vector<std::string> seen_;  // canonical paths already tried
};

}  // namespace reel::core

#endif  // REEL_CORE_PLUGIN_LOADER_H_
