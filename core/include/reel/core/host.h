// Host: what an application embeds to use reel — a registry with the built-ins and the plugins
// found on the search path, and a storage resolver over it.
//
//   auto host = reel::core::Host::Create({.plugin_dirs = {"/opt/my-plugins"}});
//   auto model = (*host)->registry().CreateModel("bilstm_video", {{"hidden", "128"}}, {});
//
// Thread-safety: Create() is single-threaded; afterwards registry() lookups and storage() are
// safe from several threads.
#ifndef REEL_CORE_HOST_H_
#define REEL_CORE_HOST_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "reel/core/plugin_loader.h"
#include "reel/core/registry.h"
#include "reel/storage.h"

namespace reel::core {

struct HostOptions {
  std::vector<std::string> plugin_dirs;  // searched before REEL_PLUGIN_PATH and the install's
  bool load_plugins = true;
  // Options per storage scheme, e.g. {"s3", {{"endpoint", "http://127.0.0.1:4568"}}}.
  std::map<std::string, std::map<std::string, std::string>> storage_options;
};

class Host : public StorageResolver {
 public:
  static Result<std::unique_ptr<Host>> Create(HostOptions options);

  Registry& registry() { return registry_; }
  const PluginLoader& plugins() const { return loader_; }
  StorageResolver& storage() { return *this; }

  // The storage serving `uri`'s scheme, created on first use. NotFound lists the schemes known.
  Result<Storage*> ForUri(std::string_view uri) override;

 private:
  explicit Host(HostOptions options) : options_(std::move(options)), loader_(registry_) {}
  HostOptions options_;
  Registry registry_;
  PluginLoader loader_;
  std::mutex mu_;
  std::map<std::string, Owned<Storage>, std::less<>> storages_;  // by scheme; guarded by mu_
};

}  // namespace reel::core

#endif  // REEL_CORE_HOST_H_
