// `reel plugins check FILE.so`: loads one plugin on its own, checks its descriptor, and runs the
// conformance checks of every component it registers (reel/core/conformance.h; transports: the
// transport conformance suite), printing pass, FAIL or skip per check with the reason.
// `--builtins` checks the core's own components instead of a file. `--readme FILE` also checks that
// the plugin's README documents exactly the options its components declare
// (reel_add_plugin_check passes the plugin project's README.md).
#include <iomanip>
#include <map>
#include <vector>

#include "args.h"
#include "cli.h"
#include "component_flags.h"
#include "reel/core/conformance.h"
#include "reel/testing/transport_conformance.h"

namespace reel::cli {
namespace {

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
  void Print(std::ostream& out, const std::string& name, bool ok, bool skip,
             const std::string& reason) {
    (skip ? skipped : ok ? passed : failed)++;
    out << "  " << std::left << std::setw(5) << (skip ? "skip" : ok ? "pass" : "FAIL") << name;
    if (!ok || skip) out << ": " << reason;  // a skip's reason is advice, not an error
    out << "\n";
  }
};

std::string Reason(const core::CheckOutcome& o) {
  return o.skipped ? o.status.message() : o.status.ToString();
}

}  // namespace

Status PluginsCheck(CliEnv& env, const std::vector<std::string>& words) {
  Args args;
  args.Value("option", true)
      .Value("feature", true)
      .Value("root")
      .Value("classes")
      .Value("readme")
      .Switch("world")
      .Switch("builtins");
  REEL_RETURN_IF_ERROR(args.Parse(words));
  const bool builtins = args.Has("builtins");
  if (args.positional().size() != (builtins ? 0u : 1u))
    return InvalidArgumentError(builtins ? "--builtins takes no file"
                                         : "name one plugin file (FILE.so), or --builtins");
  if (builtins && args.Has("readme"))
    return InvalidArgumentError("--readme checks a plugin file's README, not the built-ins");
  core::ConformanceOptions base;
  base.storage_root = args.Get("root");
  REEL_ASSIGN_OR_RETURN(base.num_classes, args.GetInt("classes", base.num_classes));
  if (base.num_classes < 1) return InvalidArgumentError("--classes must be at least 1");
  for (const std::string& f : args.GetAll("feature"))
    REEL_RETURN_IF_ERROR(ParseFeatureFlag(f, base));
  std::map<std::string, std::map<std::string, std::string>> component_options;
  for (const std::string& o : args.GetAll("option"))
    REEL_RETURN_IF_ERROR(ParseComponentOptionFlag(o, component_options));

  // The file on its own first, so its components are the ones checked; then the search path, for
  // what its components may need (another storage), whose clashes with it are only rejections.
  core::HostOptions host_options;
  host_options.plugin_dirs = env.plugin_dirs;
  if (!builtins) host_options.plugin_files = {args.positional()[0]};
  Result<std::unique_ptr<core::Host>> made = core::Host::Create(host_options);
  Tally tally;
  if (!made.ok()) {
    env.out << "plugin " << args.positional()[0] << "\n";
    tally.Print(env.out, "descriptor: loads", false, false, made.status().ToString());
    return FailedPreconditionError("the plugin does not load");
  }
  core::Host& host = **made;
  std::string provider_path;
  if (!builtins) {
    const core::LoadedPlugin& p = host.plugins().loaded().front();
    provider_path = p.path;
    env.out << "plugin " << p.name << " " << p.version << "  " << p.path << "\n  sdk "
            << p.sdk_version << ", plugin ABI " << kPluginAbiVersion << ", " << p.build_tag << "\n";
    tally.Print(env.out, "descriptor: loads (plugin ABI, SDK version, C++ runtime)", true, false,
                "");
    const core::CheckSink print = [&](const core::CheckOutcome& o) {
      tally.Print(env.out, o.name, o.status.ok(), o.skipped, Reason(o));
    };
    core::CheckPluginDescriptor(p, host.registry(), print);
    if (args.Has("readme")) {
      const std::string readme = args.Get("readme");
      Result<Storage*> storage = host.storage().ForUri(readme);
      Result<std::string> text = storage.ok() ? ReadAll(**storage, readme) : storage.status();
      if (text.ok())
        core::CheckReadmeOptions(p, host.registry(), *text, readme, print);
      else
        tally.Print(env.out, "README: readable", false, false, text.status().ToString());
    }
  }
  // Transports are checked after the other kinds, all in one run of the transport conformance
  // suite (GoogleTest registers its tests once per process), and reported one transport at a time.
  const bool world = args.Has("world");
  std::vector<std::string> transport_names;
  std::vector<conformance::TransportUnderTest> transports;
  for (const core::ComponentEntry* e : host.registry().ListAll()) {
    if (e->provider_path != provider_path) continue;
    core::ConformanceOptions options = base;
    if (auto it = component_options.find(e->info.name); it != component_options.end())
      options.options = it->second;
    if (e->kind != ComponentKind::kTransport) {
      env.out << ComponentKindName(e->kind) << " " << e->info.name << "\n";
      core::CheckComponent(host.registry(), *e, options, host.storage(),
                           [&](const core::CheckOutcome& o) {
                             tally.Print(env.out, o.name, o.status.ok(), o.skipped, Reason(o));
                           });
      continue;
    }
    std::string name = e->info.name;
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    // Every group the suite forms gets a rendezvous of its own.
    auto maker = std::make_shared<TransportMaker>(host.registry(), *e, options.options);
    // Ranks as processes meet where their launcher says (REEL_COORDINATOR), not at a port of
    // each one's own choosing.
    auto group = [maker, world]() -> Result<conformance::Group> {
      REEL_ASSIGN_OR_RETURN(TransportMaker::Made made, maker->Make());
      return conformance::Group{std::move(made.transport), world ? "" : made.coordinator};
    };
    transport_names.push_back(e->info.name);
    transports.push_back(world ? conformance::RankPerProcess(name, group)
                               : conformance::RanksAsThreads(name, group));
  }
  std::map<std::string, std::vector<conformance::SuiteOutcome>> outcomes;  // by suite name
  conformance::RunTransportSuite(
      transports, [&](const conformance::SuiteOutcome& o) { outcomes[o.transport].push_back(o); });
  for (size_t i = 0; i < transports.size(); ++i) {
    env.out << "transport " << transport_names[i] << "\n";
    for (const conformance::SuiteOutcome& o : outcomes[transports[i].name])
      tally.Print(env.out, o.name, o.passed, o.skipped, o.reason);
  }
  env.out << tally.passed + tally.failed + tally.skipped << " checks: " << tally.passed
          << " passed, " << tally.failed << " failed, " << tally.skipped << " skipped\n";
  if (tally.failed > 0)
    return FailedPreconditionError(std::to_string(tally.failed) + " check" +
                                   (tally.failed == 1 ? "" : "s") + " failed");
  return Status::Ok();
}

}  // namespace reel::cli
