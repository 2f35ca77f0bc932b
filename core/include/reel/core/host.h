// Host: what an application embeds to use reel — a registry with the built-ins and the plugins
// found on the search path, and a storage resolver over it.
//
//   auto host = reel::core::Host::Create({.plugin_dirs = {"/opt/my-plugins"}});
//   auto model = (*host)->registry().CreateModel("bilstm_video", {{"hidden", "128"}}, {});
//
// Storage options (e.g. the s3 plugin's endpoint) come from three places, the first that sets an
// option winning: HostOptions.storage_options (the reel command fills it from `--storage
// SCHEME.OPTION=VALUE` flags, then REEL_STORAGE_<SCHEME>_<OPTION> variables), then a run
// config's `storage` sections (ApplyRunConfig). So the options needed to read a config from
// s3:// can be given before the config is read.
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

#include "reel/core/config.h"
#include "reel/core/plugin_loader.h"
#include "reel/core/registry.h"
#include "reel/storage.h"

namespace reel::core {

// Options per storage scheme, e.g. {"s3", {{"endpoint", "http://127.0.0.1:4568"}}}.
using StorageOptions = std::map<std::string, std::map<std::string, std::string>>;

// How a host is built: where its plugins come from and its storages' options.
struct HostOptions {
  // Plugin files loaded first, before any directory; one that is rejected fails Create() with
  // its reason (the caller named it). `reel plugins check FILE` loads the file under test so.
  std::vector<std::string> plugin_files;
  std::vector<std::string> plugin_dirs;  // searched before REEL_PLUGIN_PATH and the install's
  bool load_plugins = true;
  // Checked against each storage's schema by Create(); a scheme no storage serves is an error.
  StorageOptions storage_options;
};

// Adds "SCHEME.OPTION=VALUE" (the --storage flag) to `options`, replacing an earlier value.
// InvalidArgument naming the flag when it has another shape.
Status AddStorageFlag(std::string_view assignment, StorageOptions& options);
// Adds every REEL_STORAGE_<SCHEME>_<OPTION>=VALUE of `environ` (a null-terminated list of
// "NAME=VALUE", as ::environ), scheme and option lower-cased: REEL_STORAGE_S3_ENDPOINT=... sets
// s3's `endpoint`. InvalidArgument naming the variable when it lacks the scheme or the option.
Status AddStorageEnvironment(char* const* environ, StorageOptions& options);

// The core for an application: a registry with the built-ins and the loaded plugins, and one
// storage per URI scheme, handed to components as their StorageResolver (storage()). Build it
// with Create().
class Host : public StorageResolver {
 public:
  static Result<std::unique_ptr<Host>> Create(HostOptions options);

  Registry& registry() { return registry_; }
  const PluginLoader& plugins() const { return loader_; }
  StorageResolver& storage() { return *this; }

  // The storage serving `uri`'s scheme, created on first use. NotFound lists the schemes known.
  Result<Storage*> ForUri(std::string_view uri) override;

  // Loads the plugins in `dirs` after those of the search path (a component name already
  // registered rejects the later file). Unlike the search path, a directory that does not exist
  // or a file in it that is rejected is an error naming it: the caller asked for these.
  Status LoadPluginDirs(const std::vector<std::string>& dirs);

  // Adds `options` for `scheme` where HostOptions did not set them, checked against the storage's
  // schema. A storage of that scheme already in use is replaced by one with the new options (the
  // old one stays alive, unused, until the host goes).
  Status AddStorageDefaults(const std::string& scheme,
                            const std::map<std::string, std::string>& options);

  // What a run config asks of the host: its plugin_dirs (LoadPluginDirs) and its storage sections
  // (AddStorageDefaults). Errors name the config line.
  Status ApplyRunConfig(const ConfigFile& cfg);

 private:
  explicit Host(HostOptions options) : options_(std::move(options)), loader_(registry_) {}
  Status CheckStorageOptions(const std::string& scheme) const;
  HostOptions options_;
  Registry registry_;
  PluginLoader loader_;
  std::mutex mu_;
  std::map<std::string, Owned<Storage>, std::less<>> storages_;  // by scheme; guarded by mu_
  std::vector<Owned<Storage>> retired_;  // replaced by AddStorageDefaults; guarded by mu_
};

}  // namespace reel::core

#endif  // REEL_CORE_HOST_H_
