#include "reel/core/plugin_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <boost/filesystem.hpp>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "reel/plugin.h"
#include "reel/version.h"

namespace reel::core {

namespace fs = boost::filesystem;

namespace {

// "runtime=libstdc++12/cxx11abi=1" of "runtime=...;compiler=...".
std::string RuntimePart(std::string_view tag) { return std::string(tag.substr(0, tag.find(';'))); }

bool ParseVersion(std::string_view v, int& major, int& minor) {
  return std::sscanf(std::string(v).c_str(), "%d.%d", &major, &minor) == 2;
}

bool LooksLikeElf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' &&
         magic[3] == 'F';
}

// The dynamic loader's own words for why `path` does not load (Boost.DLL reports only a code).
std::string DlopenReason(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    dlclose(handle);
    return "the dynamic loader refused it";
  }
  const char* why = dlerror();
  return why ? why : "the dynamic loader refused it";
}

// Checks everything in a descriptor that must hold before any of the plugin's code runs.
Status CheckDescriptor(const PluginDescriptor* d) {
  if (d == nullptr) return FailedPreconditionError("entry point returned no descriptor");
  if (d->abi_version != kPluginAbiVersion)
    return FailedPreconditionError("built for plugin ABI version " +
                                   std::to_string(d->abi_version) + ", this host speaks version " +
                                   std::to_string(kPluginAbiVersion));
  if (d->sdk_version == nullptr || d->build_tag == nullptr || d->name == nullptr ||
      d->register_components == nullptr)
    return FailedPreconditionError("descriptor is incomplete");
  int major = 0, minor = 0, host_major = 0, host_minor = 0;
  ParseVersion(REEL_SDK_VERSION, host_major, host_minor);
  if (!ParseVersion(d->sdk_version, major, minor))
    return FailedPreconditionError(std::string("unreadable SDK version '") + d->sdk_version + "'");
  if (major != host_major || minor > host_minor)
    return FailedPreconditionError(std::string("built with SDK ") + d->sdk_version +
                                   ", this host has SDK " REEL_SDK_VERSION);
  if (RuntimePart(d->build_tag) != RuntimePart(REEL_BUILD_TAG))
    return FailedPreconditionError(std::string("built for C++ runtime '") + d->build_tag +
                                   "', this host uses '" REEL_BUILD_TAG "'");
  if (std::string_view(d->name).empty())
    return FailedPreconditionError("descriptor has an empty plugin name");
  return Status::Ok();
}

}  // namespace

Status PluginLoader::Reject(const std::string& path, Status why) {
  rejected_.push_back({path, why.message()});
  return why.WithContext(path);
}

Status PluginLoader::LoadFile(const std::string& path) {
  boost::system::error_code fs_ec;
  fs::path canonical = fs::canonical(path, fs_ec);
  if (fs_ec) return Reject(path, NotFoundError("cannot open: " + fs_ec.message()));
  if (std::find(seen_.begin(), seen_.end(), canonical.string()) != seen_.end()) return Status::Ok();
  seen_.push_back(canonical.string());

  if (!LooksLikeElf(path))
    return Reject(path, InvalidArgumentError("not a shared library (no ELF header)"));
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  // RTLD_NODELETE: a plugin's code stays mapped until the process ends. Plugins start threads
  // the host cannot join (OpenMP/oneDNN worker pools); unmapping their code (and libgomp with it)
  // at the last dlclose while those threads still run crashed `reel` at exit.
  library->load(canonical,
                boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local |
                    static_cast<boost::dll::load_mode::type>(RTLD_NODELETE),
                ec);
  if (ec || !library->is_loaded())
    return Reject(path, InvalidArgumentError("not loadable: " + DlopenReason(canonical.string())));
  if (!library->has(kPluginEntrySymbol))
    return Reject(path, InvalidArgumentError(std::string("not a reel plugin: no '") +
                                             kPluginEntrySymbol + "' entry symbol"));

  const void* entry_address = library->get<const void*>(kPluginEntrySymbol);
  auto entry = reinterpret_cast<PluginEntryFn>(const_cast<void*>(entry_address));
  const PluginDescriptor* d = entry ? entry() : nullptr;
  if (Status s = CheckDescriptor(d); !s.ok()) return Reject(path, s);

  for (const LoadedPlugin& p : loaded_)
    if (p.name == d->name)
      return Reject(path, AlreadyExistsError(std::string("plugin '") + d->name +
                                             "' is already loaded from " + p.path));

  if (Status s = registry_.RegisterFrom(d->name, path, library, d->register_components); !s.ok())
    return Reject(path, s);

  LoadedPlugin record{path,
                      d->name,
                      d->version ? d->version : "",
                      d->description ? d->description : "",
                      d->sdk_version,
                      d->build_tag,
                      {}};
  for (const ComponentEntry* e : registry_.ListAll())
    if (e->provider_path == path)
      record.components.push_back(std::string(ComponentKindName(e->kind)) + " " + e->info.name);
  loaded_.push_back(std::move(record));
  return Status::Ok();
}

void PluginLoader::LoadDirectory(const std::string& dir) {
  boost::system::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".so" && !fs::is_directory(p, ec)) files.push_back(p.string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) (void)LoadFile(f);
}

void PluginLoader::LoadSearchPath(const std::vector<std::string>& plugin_dirs) {
  for (const auto& dir : DefaultSearchPath(plugin_dirs)) LoadDirectory(dir);
}

std::vector<std::string> PluginLoader::DefaultSearchPath(
    const std::vector<std::string>& plugin_dirs) {
  std::vector<std::string> out(plugin_dirs.begin(), plugin_dirs.end());
  if (const char* env = std::getenv("REEL_PLUGIN_PATH")) {
    std::string_view rest(env);
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string_view item = rest.substr(0, colon);
      if (!item.empty()) out.emplace_back(item);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  boost::dll::fs::error_code ec;
  fs::path exe = boost::dll::program_location(ec);
  if (!ec)
    out.push_back(
        (exe.parent_path().parent_path() / REEL_PLUGIN_INSTALL_SUBDIR).lexically_normal().string());
  return out;
}

}  // namespace reel::core
