// The descriptor checks and the dispatch to each kind's checks (reel/core/conformance.h).
#include "reel/core/conformance.h"

#include <regex>
#include <set>

#include "checks.h"

namespace reel::core {

using conformance_internal::Report;

void CheckPluginDescriptor(const LoadedPlugin& plugin, const Registry& registry,
                           const CheckSink& sink) {
  Report(sink, "descriptor: version is MAJOR.MINOR.PATCH",
         std::regex_match(plugin.version, std::regex("[0-9]+\\.[0-9]+\\.[0-9]+([-+].*)?"))
             ? Status::Ok()
             : InvalidArgumentError("version is '" + plugin.version + "'"));
  Report(
      sink, "descriptor: has a description",
      plugin.description.empty() ? InvalidArgumentError("the description is empty") : Status::Ok());
  int components = 0;
  for (const ComponentEntry* e : registry.ListAll()) {
    if (e->provider_path != plugin.path) continue;
    ++components;
    const std::string what = std::string(ComponentKindName(e->kind)) + " " + e->info.name;
    Status schema = Status::Ok();
    std::set<std::string> names;
    for (const OptionSpec& o : e->info.options) {
      if (!schema.ok()) break;
      if (o.name.empty() || !names.insert(o.name).second)
        schema = InvalidArgumentError("option name '" + o.name + "' is empty or repeated");
      else if (o.help.empty())
        schema = InvalidArgumentError("option '" + o.name + "' has no help text");
      else if (!o.required)
        schema = ParseOptionValue(o, o.default_value)
                     .status()
                     .WithContext("default of option '" + o.name + "'");
    }
    Report(sink, what + ": has a description and a valid option schema",
           !schema.ok()                  ? schema
           : e->info.description.empty() ? InvalidArgumentError("the description is empty")
                                         : Status::Ok());
  }
  Report(sink, "descriptor: registers at least one component",
         components > 0 ? Status::Ok() : InvalidArgumentError("it registered nothing"));
}

void CheckComponent(const Registry& registry, const ComponentEntry& entry,
                    const ConformanceOptions& options, StorageResolver& storage,
                    const CheckSink& sink) {
  namespace ci = conformance_internal;
  switch (entry.kind) {
    case ComponentKind::kStorage:
      return ci::CheckStorage(registry, entry, options, sink);
    case ComponentKind::kDataSource:
      return ci::CheckDataSource(registry, entry, options, storage, sink);
    case ComponentKind::kModel:
      return ci::CheckModel(registry, entry, options, sink);
    case ComponentKind::kOptimizer:
      return ci::CheckOptimizer(registry, entry, options, sink);
    case ComponentKind::kCommand:
      return ci::CheckCommand(registry, entry, storage, sink);
    case ComponentKind::kTransport:
      return ci::Skip(sink, "transport conformance",
                      "run by the transport conformance suite (reel plugins check does)");
  }
}

}  // namespace reel::core
