#include "reel/core/host.h"

namespace reel::core {

Result<std::unique_ptr<Host>> Host::Create(HostOptions options) {
  std::unique_ptr<Host> host(new Host(std::move(options)));
  REEL_RETURN_IF_ERROR(
      host->registry_.RegisterBuiltins().WithContext("registering built-in components"));
  if (host->options_.load_plugins) host->loader_.LoadSearchPath(host->options_.plugin_dirs);
  return host;
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

}  // namespace reel::core
