// `reel plugins [list|show NAME]` and `reel version`.
#include <algorithm>
#include <iomanip>

#include "cli.h"
#include "reel/core/plugin_loader.h"
#include "reel/version.h"

namespace reel::cli {

Status PluginsCheck(CliEnv& env, const std::vector<std::string>& args);  // cmd_plugins_check.cc

namespace {

void PrintSchema(std::ostream& out, const OptionSchema& schema) {
  if (schema.empty()) {
    out << "      (no options)\n";
    return;
  }
  auto default_text = [](const OptionSpec& o) {
    return o.required ? std::string("(required)")
                      : "= " + (o.default_value.empty() ? "\"\"" : o.default_value);
  };
  // Columns at least as wide as their longest entry plus a space, so a long name or default
  // never runs into the next column.
  size_t name_width = 18, default_width = 16;
  for (const OptionSpec& o : schema) {
    name_width = std::max(name_width, o.name.size() + 1);
    default_width = std::max(default_width, default_text(o).size() + 1);
  }
  for (const OptionSpec& o : schema) {
    out << "      " << std::left << std::setw(static_cast<int>(name_width)) << o.name
        << std::setw(12) << OptionTypeName(o.type) << std::setw(static_cast<int>(default_width))
        << default_text(o) << o.help << "\n";
  }
}

void PrintComponent(std::ostream& out, const core::ComponentEntry& e, bool with_schema) {
  out << "    " << ComponentKindName(e.kind) << " " << e.info.name;
  if (!e.info.description.empty()) out << " — " << e.info.description;
  out << "\n";
  if (with_schema && e.kind != ComponentKind::kCommand) PrintSchema(out, e.info.options);
}

Status List(CliEnv& env) {
  const core::PluginLoader& loader = env.host.plugins();
  std::ostream& out = env.out;
  out << "search path:\n";
  for (const std::string& dir : core::PluginLoader::DefaultSearchPath(env.plugin_dirs))
    out << "  " << dir << "\n";
  out << "\nbuilt-in components:\n";
  for (const core::ComponentEntry* e : env.host.registry().ListAll())
    if (e->provider_path.empty()) PrintComponent(out, *e, false);
  out << "\nplugins (" << loader.loaded().size() << "):\n";
  for (const core::LoadedPlugin& p : loader.loaded()) {
    out << "  " << p.name << " " << p.version << "  " << p.path << "\n";
    if (!p.description.empty()) out << "    " << p.description << "\n";
    for (const core::ComponentEntry* e : env.host.registry().ListAll())
      if (e->provider_path == p.path) PrintComponent(out, *e, false);
  }
  if (!loader.rejected().empty()) {
    out << "\nrejected files (" << loader.rejected().size() << "):\n";
    for (const core::RejectedFile& r : loader.rejected())
      out << "  " << r.path << ": " << r.reason << "\n";
  }
  return Status::Ok();
}

Status Show(CliEnv& env, const std::string& name) {
  bool found = false;
  for (const core::LoadedPlugin& p : env.host.plugins().loaded()) {
    if (p.name != name) continue;
    found = true;
    env.out << "plugin " << p.name << " " << p.version << "\n  file: " << p.path
            << "\n  sdk: " << p.sdk_version << "\n  build: " << p.build_tag << "\n  "
            << p.description << "\n  components:\n";
    for (const core::ComponentEntry* e : env.host.registry().ListAll())
      if (e->provider_path == p.path) PrintComponent(env.out, *e, true);
  }
  for (const core::ComponentEntry* e : env.host.registry().ListAll()) {
    if (e->info.name != name) continue;
    found = true;
    env.out << "component provided by "
            << (e->provider_path.empty() ? "the core" : e->provider_path) << ":\n";
    PrintComponent(env.out, *e, true);
  }
  if (!found)
    return NotFoundError("no plugin or component named '" + name + "' (see `reel plugins`)");
  return Status::Ok();
}

Status PluginsCommand(CliEnv& env, const std::vector<std::string>& args) {
  if (args.empty() || (args.size() == 1 && args[0] == "list")) return List(env);
  if (args.size() == 2 && args[0] == "show") return Show(env, args[1]);
  if (!args.empty() && args[0] == "check")
    return PluginsCheck(env, std::vector<std::string>(args.begin() + 1, args.end()));
  return InvalidArgumentError("unexpected arguments; see the usage (flag)");
}

Status VersionCommand(CliEnv& env, const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgumentError("`reel version` takes no arguments (flag)");
  env.out << "reel " << REEL_SDK_VERSION << "\nplugin ABI " << kPluginAbiVersion << "\nbuild "
          << REEL_BUILD_TAG << "\n";
  return Status::Ok();
}

}  // namespace

CliCommand PluginsCliCommand() {
  return {
      "plugins",
      "list the plugins found, their components and option schemas, and rejected files; check one",
      "reel plugins [list | show NAME | check FILE.so|--builtins [--option COMPONENT.KEY=VALUE]... "
      "[--root URI] [--feature NAME=WIDTH[xFRAMES]]... [--classes N] [--world] [--readme FILE]]",
      PluginsCommand};
}

CliCommand VersionCliCommand() {
  return {"version", "print the version, plugin ABI and build tag", "reel version", VersionCommand};
}

}  // namespace reel::cli
