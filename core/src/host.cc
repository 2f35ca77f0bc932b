#include "reel/core/host.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace reel::core {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

Status AddStorageFlag(std::string_view assignment, StorageOptions& options) {
  const size_t dot = assignment.find('.'), eq = assignment.find('=');
  if (dot == std::string_view::npos || eq == std::string_view::npos || dot == 0 || eq < dot + 2)
    return InvalidArgumentError("--storage " + std::string(assignment) +
                                ": expected SCHEME.OPTION=VALUE (e.g. s3.endpoint=http://...)");
  options[std::string(assignment.substr(0, dot))]
         [std::string(assignment.substr(dot + 1, eq - dot - 1))] =
             std::string(assignment.substr(eq + 1));
  return Status::Ok();
}

Status AddStorageEnvironment(char* const* environ, StorageOptions& options) {
  constexpr std::string_view kPrefix = "REEL_STORAGE_";
  for (char* const* e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.substr(0, kPrefix.size()) != kPrefix) continue;
    const size_t eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    const std::string_view rest = name.substr(kPrefix.size());
    const size_t sep = rest.find('_');
    if (eq == std::string_view::npos || sep == std::string_view::npos || sep == 0 ||
        sep + 1 == rest.size())
      return InvalidArgumentError("environment variable " + std::string(name) +
                                  ": expected REEL_STORAGE_<SCHEME>_<OPTION>=VALUE (e.g. "
                                  "REEL_STORAGE_S3_ENDPOINT=http://...)");
    options[Lower(rest.substr(0, sep))][Lower(rest.substr(sep + 1))] =
        std::string(entry.substr(eq + 1));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Host>> Host::Create(HostOptions options) {
  std::unique_ptr<Host> host(new Host(std::move(options)));
  REEL_RETURN_IF_ERROR(
      host->registry_.RegisterBuiltins().WithContext("registering built-in components"));
  for (const std::string& file : host->options_.plugin_files)
    REEL_RETURN_IF_ERROR(host->loader_.LoadFile(file));
  if (host->options_.load_plugins) host->loader_.LoadSearchPath(host->options_.plugin_dirs);
  for (const auto& [scheme, unused] : host->options_.storage_options)
    REEL_RETURN_IF_ERROR(host->CheckStorageOptions(scheme).WithContext(
        "storage options for '" + scheme + "' (--storage or REEL_STORAGE_" + scheme + "_*)"));
  return host;
}

Status Host::CheckStorageOptions(const std::string& scheme) const {
  if (registry_.Find(ComponentKind::kStorage, scheme) == nullptr)
    return NotFoundError("no storage named '" + scheme + "' is registered (registered: " +
                         registry_.Names(ComponentKind::kStorage) + ")");
  auto it = options_.storage_options.find(scheme);
  if (it == options_.storage_options.end()) return Status::Ok();
  return registry_.ParseComponentOptions(ComponentKind::kStorage, scheme, it->second).status();
}

Result<Storage*> Host::ForUri(std::string_view uri) {
  std::string scheme(UriScheme(uri));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = storages_.find(scheme); it != storages_.end()) return it->second.get();
  if (registry_.Find(ComponentKind::kStorage, scheme) == nullptr)
    return NotFoundError(std::string(uri) + ": no storage serves '" + scheme +
                         "://' URIs (registered: " + registry_.Names(ComponentKind::kStorage) +
                         ")");
  std::map<std::string, std::string> opts;
  if (auto it = options_.storage_options.find(scheme); it != options_.storage_options.end())
    opts = it->second;
  REEL_ASSIGN_OR_RETURN(Owned<Storage> storage, registry_.CreateStorage(scheme, opts));
  Storage* raw = storage.get();
  storages_.emplace(scheme, std::move(storage));
  return raw;
}

Status Host::LoadPluginDirs(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      return NotFoundError("plugin directory '" + dir + "' does not exist");
    const size_t rejected_before = loader_.rejected().size();
    loader_.LoadDirectory(dir);
    if (loader_.rejected().size() > rejected_before) {
      const RejectedFile& r = loader_.rejected()[rejected_before];
      return FailedPreconditionError("plugin directory '" + dir + "': " + r.path + ": " + r.reason);
    }
  }
  return Status::Ok();
}

Status Host::AddStorageDefaults(const std::string& scheme,
                                const std::map<std::string, std::string>& options) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::string>& current = options_.storage_options[scheme];
  const std::map<std::string, std::string> before = current;
  for (const auto& [key, value] : options) current.emplace(key, value);  // set ones win
  if (Status s = CheckStorageOptions(scheme); !s.ok()) {
    current = before;
    return s;
  }
  if (current != before) {
    if (auto it = storages_.find(scheme); it != storages_.end()) {
      retired_.push_back(std::move(it->second));
      storages_.erase(it);
    }
  }
  return Status::Ok();
}

Status Host::ApplyRunConfig(const ConfigFile& cfg) {
  const config::RunConfig& c = cfg.config;
  REEL_RETURN_IF_ERROR(LoadPluginDirs({c.plugin_dirs().begin(), c.plugin_dirs().end()})
                           .WithContext(cfg.Where("plugin_dirs")));
  for (const config::Component& s : c.storage()) {
    if (s.name().empty())
      return InvalidArgumentError(cfg.Where("storage") +
                                  ": a storage section needs the name of its scheme (e.g. "
                                  "storage { name: \"s3\" options { ... } })");
    REEL_RETURN_IF_ERROR(AddStorageDefaults(s.name(), OptionMap(s))
                             .WithContext(cfg.Where("storage") + ": storage '" + s.name() + "'"));
  }
  return Status::Ok();
}

}  // namespace reel::core
