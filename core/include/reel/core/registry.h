// Registry: every component a host can build, by kind and name, built-in or from a plugin.
//
// Plugins add components through the SDK's Registrar interface while the loader has them open;
// a plugin's components are added all together or not at all. Objects created through the
// registry hold a reference to the library that made them (Owned<T>'s deleter), so a library is
// never unloaded under a live object.
//
// Thread-safety: registration is single-threaded (at start-up); lookups and Create*() calls may
// run concurrently once registration is done.
#ifndef REEL_CORE_REGISTRY_H_
#define REEL_CORE_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reel/plugin.h"

namespace reel::core {

// Deletes the object, then drops its reference to the library its code lives in.
struct KeepLibraryDeleter {
  std::shared_ptr<const void> library;  // null for built-ins
  template <typename T>
  void operator()(T* p) const {
    delete p;
  }
};
template <typename T>
using Owned = std::unique_ptr<T, KeepLibraryDeleter>;

// One registered component: its kind, schema and factory, and who provided it.
struct ComponentEntry {
  // First member, so it is destroyed last: the factory's code lives in this library.
  std::shared_ptr<const void> library;  // null for built-ins
  ComponentKind kind;
  ComponentInfo info;
  AnyFactory factory;
  std::string provider;       // plugin name, or "builtin"
  std::string provider_path;  // the plugin file, empty for built-ins
};

// Every component the host knows, by kind and name: the built-ins and what plugins registered.
// Builds components from options checked against their schemas.
class Registry : public Registrar {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds the core's own components: storage "file", transport "inproc", optimizer "sync".
  Status RegisterBuiltins();

  // Runs `register_fn` on behalf of a provider; its components are committed only if every Add
  // succeeds and no name collides with an existing one (the error names both providers).
  Status RegisterFrom(const std::string& provider, const std::string& provider_path,
                      std::shared_ptr<const void> library, RegisterFn register_fn);

  const ComponentEntry* Find(ComponentKind kind, const std::string& name) const;
  std::vector<const ComponentEntry*> List(ComponentKind kind) const;
  std::vector<const ComponentEntry*> ListAll() const;
  // "file, s3" — for "unknown component" errors.
  std::string Names(ComponentKind kind) const;
  // The component a run uses when its config has no section of this kind: optimizer "sync" and
  // transport "inproc" once RegisterBuiltins() ran; empty for kinds a config must name.
  std::string DefaultName(ComponentKind kind) const;

  // Create a component from its name and its options as text, validated against its schema.
  // Errors: NotFound listing the registered names; InvalidArgument naming the option.
  Result<Owned<Storage>> CreateStorage(const std::string& name,
                                       const std::map<std::string, std::string>& options) const;
  Result<Owned<DataSource>> CreateDataSource(const std::string& name,
                                             const std::map<std::string, std::string>& options,
                                             const DataSourceContext& ctx) const;
  Result<Owned<Model>> CreateModel(const std::string& name,
                                   const std::map<std::string, std::string>& options,
                                   const ModelContext& ctx) const;
  Result<Owned<Optimizer>> CreateOptimizer(const std::string& name,
                                           const std::map<std::string, std::string>& options,
                                           const OptimizerContext& ctx = {}) const;
  Result<Owned<Transport>> CreateTransport(const std::string& name,
                                           const std::map<std::string, std::string>& options) const;
  Result<Owned<Command>> CreateCommand(const std::string& name) const;

  // Validates options for a component without creating it.
  Result<Options> ParseComponentOptions(ComponentKind kind, const std::string& name,
                                        const std::map<std::string, std::string>& options) const;

 protected:
  Status AddComponent(ComponentInfo info, AnyFactory factory) override;

 private:
  struct Staging;
  Result<const ComponentEntry*> Lookup(ComponentKind kind, const std::string& name) const;

  std::vector<std::unique_ptr<ComponentEntry>> entries_;
  std::map<ComponentKind, std::string> defaults_;
  Staging* staging_ = nullptr;  // set while a provider registers
};

}  // namespace reel::core

#endif  // REEL_CORE_REGISTRY_H_
