// Run configuration: text-format protobuf files (proto/config.proto) in the style of TensorFlow's
// pipeline configs, with single fields overridden from the command line.
//
//   REEL_ASSIGN_OR_RETURN(ConfigFile cfg, LoadConfigFile(host.storage(), "run.pbtxt"));
//   REEL_RETURN_IF_ERROR(ApplyOverride(cfg, "model.options.hidden=128"));
//   REEL_RETURN_IF_ERROR(ValidateComponents(cfg, registry));
//
// Every error names the file and line (or the --set flag) and the field or option at fault.
// Thread-safety: values; no shared state.
#ifndef REEL_CORE_CONFIG_H_
#define REEL_CORE_CONFIG_H_

#include <map>
#include <string>
#include <string_view>

#include "config.pb.h"
#include "reel/core/registry.h"
#include "reel/status.h"
#include "reel/storage.h"

namespace reel::core {

// A parsed run configuration and where each of its fields came from, so errors name file and line.
struct ConfigFile {
  config::RunConfig config;
  std::string path;                  // where it came from, for messages ("<flags>" if none)
  std::map<std::string, int> lines;  // "model.name", "model.options.hidden", ... → 1-based line
  std::map<std::string, std::string> overridden;  // field path → the --set flag that set it

  // "run.pbtxt:12" for a field path, or "--set model.options.hidden=x", or just the path.
  std::string Where(const std::string& field_path) const;
};

// Parses `text`; `name` is used in messages. Syntax errors and unknown fields are InvalidArgument
// "name:line:column: ...".
Result<ConfigFile> ParseConfig(std::string_view text, std::string name);
// Reads `path` (a local path or any URI `storage` serves, e.g. s3://bucket/run.pbtxt) and parses
// it. Relative plugin_dirs of a local config file are made relative to the file's directory, so a
// config and the plugins beside it can move together; those of a config read from another
// storage, and any added later with --set, stay relative to the working directory.
Result<ConfigFile> LoadConfigFile(StorageResolver& storage, const std::string& path);

// Applies "section.field=value" (e.g. "trainer.steps=500", "optimizer.name=async_sgd",
// "model.options.hidden=128", "trainer.learning_rate.base=0.01"). Unknown fields and values of
// the wrong type are InvalidArgument naming the flag.
Status ApplyOverride(ConfigFile& cfg, std::string_view assignment);

// Checks every component section that is present: a known component name and options that fit
// its schema. `required` lists sections that must be present (e.g. {"data", "model"}).
Status ValidateComponents(const ConfigFile& cfg, const Registry& registry,
                          const std::vector<std::string>& required = {});

// The options of a component section as the registry expects them.
std::map<std::string, std::string> OptionMap(const config::Component& c);
std::map<std::string, std::string> OptionMap(const config::Transport& t);

// Parses text-format `text` into `msg` (any message: a RunConfig, a TuneConfig, ...). Errors are
// InvalidArgument "name:line:column: ..."; `lines`, when given, receives the 1-based line of every
// field path present ("trainer.steps", "model.options.hidden", ...).
Status ParseTextMessage(std::string_view text, const std::string& name,
                        google::protobuf::Message& msg, std::map<std::string, int>* lines);

// Text format of the whole config (for checkpoints and `--print-config`).
std::string ConfigToText(const config::RunConfig& config);

}  // namespace reel::core

#endif  // REEL_CORE_CONFIG_H_
