#include "reel/core/registry.h"

#include <algorithm>

#include "builtins.h"

namespace reel::core {

// Components added by the provider currently registering, committed together.
struct Registry::Staging {
  std::string provider;
  std::string provider_path;
  std::shared_ptr<const void> library;
  std::vector<std::unique_ptr<ComponentEntry>> entries;
  Status first_error;
};

namespace {

std::string Describe(const ComponentEntry& e) {
  if (e.provider_path.empty()) return "the " + e.provider + " components";
  return "plugin '" + e.provider + "' (" + e.provider_path + ")";
}

std::string DescribeStaging(const std::string& provider, const std::string& path) {
  if (path.empty()) return "the " + provider + " components";
  return "plugin '" + provider + "' (" + path + ")";
}

}  // namespace

Status Registry::RegisterBuiltins() {
  auto all = [](Registrar& r) noexcept -> Status {
    REEL_RETURN_IF_ERROR(RegisterFileStorage(r));
    REEL_RETURN_IF_ERROR(RegisterInprocTransport(r));
    return RegisterSyncOptimizer(r);
  };
  REEL_RETURN_IF_ERROR(RegisterFrom("builtin", "", nullptr, all));
  defaults_[ComponentKind::kOptimizer] = "sync";
  defaults_[ComponentKind::kTransport] = "inproc";
  return Status::Ok();
}

std::string Registry::DefaultName(ComponentKind kind) const {
  auto it = defaults_.find(kind);
  return it == defaults_.end() ? std::string() : it->second;
}

Status Registry::RegisterFrom(const std::string& provider, const std::string& provider_path,
                              std::shared_ptr<const void> library, RegisterFn register_fn) {
  Staging staging{provider, provider_path, std::move(library), {}, Status::Ok()};
  staging_ = &staging;
  Status status = register_fn(*this);
  staging_ = nullptr;
  if (status.ok()) status = staging.first_error;
  if (!status.ok()) return status;
  for (auto& e : staging.entries) entries_.push_back(std::move(e));
  return Status::Ok();
}

Status Registry::AddComponent(ComponentInfo info, AnyFactory factory) {
  if (staging_ == nullptr)
    return FailedPreconditionError("components can only be added while a provider registers");
  Staging& s = *staging_;
  auto fail = [&](Status st) {
    if (s.first_error.ok()) s.first_error = st;
    return st;
  };
  auto kind = static_cast<ComponentKind>(factory.index());
  const std::string what = std::string(ComponentKindName(kind)) + " '" + info.name + "'";
  if (info.name.empty()) return fail(InvalidArgumentError("a component has an empty name"));
  for (const auto& e : entries_)
    if (e->kind == kind && e->info.name == info.name)
      return fail(AlreadyExistsError(what + " is registered by both " + Describe(*e) + " and " +
                                     DescribeStaging(s.provider, s.provider_path)));
  for (const auto& e : s.entries)
    if (e->kind == kind && e->info.name == info.name)
      return fail(AlreadyExistsError(what + " is registered twice by " +
                                     DescribeStaging(s.provider, s.provider_path)));
  for (const auto& spec : info.options)
    if (spec.name.empty())
      return fail(InvalidArgumentError(what + " declares an option with no name"));
  auto entry = std::make_unique<ComponentEntry>(ComponentEntry{
      s.library, kind, std::move(info), std::move(factory), s.provider, s.provider_path});
  s.entries.push_back(std::move(entry));
  return Status::Ok();
}

const ComponentEntry* Registry::Find(ComponentKind kind, const std::string& name) const {
  for (const auto& e : entries_)
    if (e->kind == kind && e->info.name == name) return e.get();
  return nullptr;
}

std::vector<const ComponentEntry*> Registry::List(ComponentKind kind) const {
  std::vector<const ComponentEntry*> out;
  for (const auto& e : entries_)
    if (e->kind == kind) out.push_back(e.get());
  std::sort(out.begin(), out.end(),
            [](const auto* a, const auto* b) { return a->info.name < b->info.name; });
  return out;
}

std::vector<const ComponentEntry*> Registry::ListAll() const {
  std::vector<const ComponentEntry*> out;
  for (const auto& e : entries_) out.push_back(e.get());
  std::stable_sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    return std::tie(a->kind, a->info.name) < std::tie(b->kind, b->info.name);
  });
  return out;
}

std::string Registry::Names(ComponentKind kind) const {
  std::string out;
  for (const auto* e : List(kind)) out += (out.empty() ? "" : ", ") + e->info.name;
  return out.empty() ? "none" : out;
}

Result<const ComponentEntry*> Registry::Lookup(ComponentKind kind, const std::string& name) const {
  if (const ComponentEntry* e = Find(kind, name)) return e;
  std::string what = ComponentKindName(kind);
  if (name.empty())
    return InvalidArgumentError(what + " section has no name (registered: " + Names(kind) + ")");
  return NotFoundError("no " + what + " named '" + name +
                       "' is registered (registered: " + Names(kind) +
                       "; `reel plugins` shows what was loaded and why files were rejected)");
}

Result<Options> Registry::ParseComponentOptions(
    ComponentKind kind, const std::string& name,
    const std::map<std::string, std::string>& options) const {
  REEL_ASSIGN_OR_RETURN(const ComponentEntry* e, Lookup(kind, name));
  return ParseOptions(e->info.options, options,
                      std::string(ComponentKindName(kind)) + " '" + name + "'");
}

namespace {

// Calls the entry's factory of type F and ties the object to the entry's library.
template <typename T, typename F, typename... A>
Result<Owned<T>> Build(const ComponentEntry& e, const Options& options, A&&... args) {
  const F* factory = std::get_if<F>(&e.factory);
  if (factory == nullptr)
    return InternalError("component '" + e.info.name + "' has a mismatched factory");
  Result<std::unique_ptr<T>> made = (*factory)(options, std::forward<A>(args)...);
  if (!made.ok())
    return made.status().WithContext(std::string(ComponentKindName(e.kind)) + " '" + e.info.name +
                                     "'");
  if (*made == nullptr)
    return InternalError(std::string(ComponentKindName(e.kind)) + " '" + e.info.name +
                         "': factory returned null");
  return Owned<T>(made->release(), KeepLibraryDeleter{e.library});
}

}  // namespace

Result<Owned<Storage>> Registry::CreateStorage(
    const std::string& name, const std::map<std::string, std::string>& options) const {
  REEL_ASSIGN_OR_RETURN(const ComponentEntry* e, Lookup(ComponentKind::kStorage, name));
  REEL_ASSIGN_OR_RETURN(Options o, ParseComponentOptions(ComponentKind::kStorage, name, options));
  return Build<Storage, StorageFactory>(*e, o);
}

Result<Owned<DataSource>> Registry::CreateDataSource(
    const std::string& name, const std::map<std::string, std::string>& options,
    const DataSourceContext& ctx) const {
  REEL_ASSIGN_OR_RETURN(const ComponentEntry* e, Lookup(ComponentKind::kDataSource, name));
  REEL_ASSIGN_OR_RETURN(Options o,
                        ParseComponentOptions(ComponentKind::kDataSource, name, options));
  return Build<DataSource, DataSourceFactory>(*e, o, ctx);
}

Result<Owned<Model>> Registry::CreateModel(const std::string& name,
                                           const std::map<std::string, std::string>& options,
                                           const ModelContext& ctx) const {
  REEL_ASSIGN_OR_RETURN(const ComponentEntry* e, Lookup(ComponentKind::kModel, name));
  REEL_ASSIGN_OR_RETURN(Options o, ParseComponentOptions(ComponentKind::kModel, name, options));
  return Build<Model, ModelFactory>(*e, o, ctx);
}

Result<Owned<Optimizer>> Registry::CreateOptimizer(
    const std::string& name, const std::map<std::string, std::string>& options,
    const OptimizerContext& ctx) const {
  REEL_ASSIGN_OR_RETURN(const ComponentEntry* e, Lookup(ComponentKind::kOptimizer, name));
  REEL_ASSIGN_OR_RETURN(Options o, ParseComponentOptions(ComponentKind::kOptimizer, name, options));
  return Build<Optimizer, OptimizerFactory>(*e, o, ctx);
}

Result<Owned<Transport>> Registry::CreateTransport(
    const std::string& name, const std::map<std::string, std::string>& options) const {
  REEL_ASSIGN_OR_RETURN(const ComponentEntry* e, Lookup(ComponentKind::kTransport, name));
  REEL_ASSIGN_OR_RETURN(Options o, ParseComponentOptions(ComponentKind::kTransport, name, options));
  return Build<Transport, TransportFactory>(*e, o);
}

Result<Owned<Command>> Registry::CreateCommand(const std::string& name) const {
  REEL_ASSIGN_OR_RETURN(const ComponentEntry* e, Lookup(ComponentKind::kCommand, name));
  const CommandFactory* factory = std::get_if<CommandFactory>(&e->factory);
  if (factory == nullptr) return InternalError("command '" + name + "' has a mismatched factory");
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<Command> made, (*factory)());
  if (made == nullptr) return InternalError("command '" + name + "': factory returned null");
  return Owned<Command>(made.release(), KeepLibraryDeleter{e->library});
}

}  // namespace reel::core
