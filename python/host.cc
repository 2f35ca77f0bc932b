#include "host.h"

#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "array_source.h"

extern char** environ;

namespace reel::python {
namespace {

std::mutex g_mu;
std::unique_ptr<core::Host> g_host;  // guarded by g_mu; lives until the interpreter exits

// <dir of libreel.so>/reel/plugins: the command's <exe>/../lib/reel/plugins, as reel and libreel
// are installed (and built) into bin/ and lib/ of one prefix.
std::string InstallPluginDir() {
  boost::dll::fs::error_code ec;
  auto lib = boost::dll::symbol_location_ptr(&core::Host::Create, ec);
  if (ec) return {};
  return (lib.parent_path() / "reel" / "plugins").lexically_normal().string();
}

}  // namespace

core::Host& GetHost(const std::vector<std::string>& plugin_dirs) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_host) return *g_host;
  core::HostOptions options;
  // The command's order: its own directories, REEL_PLUGIN_PATH, the install's. The loader adds
  // REEL_PLUGIN_PATH and <python>/../lib/reel/plugins again; a file seen twice loads once.
  options.plugin_dirs = plugin_dirs;
  if (const char* env = std::getenv("REEL_PLUGIN_PATH")) {
    std::string rest = env;
    for (size_t start = 0; start <= rest.size();) {
      size_t colon = rest.find(':', start);
      if (colon == std::string::npos) colon = rest.size();
      if (colon > start) options.plugin_dirs.push_back(rest.substr(start, colon - start));
      start = colon + 1;
    }
  }
  if (std::string dir = InstallPluginDir(); !dir.empty()) options.plugin_dirs.push_back(dir);
  ThrowIfError(core::AddStorageEnvironment(environ, options.storage_options));
  std::unique_ptr<core::Host> host = ValueOrThrow(core::Host::Create(std::move(options)));
  ThrowIfError(RegisterArraySource(host->registry()));  // reel.sklearn's arrays
  g_host = std::move(host);
  return *g_host;
}

bool HostCreated() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_host != nullptr;
}

}  // namespace reel::python
