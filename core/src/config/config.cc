#include "reel/core/config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <filesystem>
#include <limits>

namespace reel::core {

namespace pb = google::protobuf;

namespace {

// Collects the parser's complaints as "name:line:col: message".
class Collector : public pb::io::ErrorCollector {
 public:
  explicit Collector(std::string name) : name_(std::move(name)) {}
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty())
      first_ = name_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
               message;
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string name_;
  std::string first_;
};

// Records the line of every field (and of every map key) under `prefix`.
void RecordLines(const pb::Message& msg, const pb::TextFormat::ParseInfoTree* tree,
                 const std::string& prefix, std::map<std::string, int>& lines) {
  const pb::Reflection* refl = msg.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  refl->ListFields(msg, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (f->is_map()) {
      for (int i = 0; i < refl->FieldSize(msg, f); ++i) {
        const pb::Message& entry = refl->GetRepeatedMessage(msg, f, i);
        const pb::FieldDescriptor* key = entry.GetDescriptor()->FindFieldByNumber(1);
        std::string k = entry.GetReflection()->GetString(entry, key);
        auto loc = tree->GetLocation(f, i);
        if (loc.line >= 0) lines[path + "." + k] = loc.line + 1;
      }
      continue;
    }
    int index = f->is_repeated() ? 0 : -1;
    auto loc = tree->GetLocation(f, index);
    if (loc.line >= 0) lines[path] = loc.line + 1;
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated()) {
      if (const auto* nested = tree->GetTreeForNested(f, -1))
        RecordLines(refl->GetMessage(msg, f), nested, path, lines);
    }
  }
}

Status SetScalar(pb::Message& msg, const pb::FieldDescriptor* f, const std::string& value,
                 const std::string& flag) {
  const pb::Reflection* r = msg.GetReflection();
  auto bad = [&](const char* type) {
    return InvalidArgumentError("--set " + flag + ": '" + value + "' is not " + type);
  };
  char* end = nullptr;
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING:
      if (f->is_repeated())
        r->AddString(&msg, f, value);
      else
        r->SetString(&msg, f, value);
      return Status::Ok();
    case pb::FieldDescriptor::CPPTYPE_INT64:
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end) return bad("an integer");
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64)
        r->SetInt64(&msg, f, v);
      else
        r->SetInt32(&msg, f, static_cast<int32_t>(v));
      return Status::Ok();
    }
    case pb::FieldDescriptor::CPPTYPE_UINT64:
    case pb::FieldDescriptor::CPPTYPE_UINT32: {
      if (!value.empty() && value[0] == '-') return bad("a non-negative integer");
      unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end) return bad("a non-negative integer");
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT64)
        r->SetUInt64(&msg, f, v);
      else
        r->SetUInt32(&msg, f, static_cast<uint32_t>(v));
      return Status::Ok();
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end) return bad("a number");
      // strtod also takes "nan" and "inf"; no run setting means either.
      if (!std::isfinite(v) || (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_FLOAT &&
                                std::fabs(v) > std::numeric_limits<float>::max()))
        return bad("a finite number");
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE)
        r->SetDouble(&msg, f, v);
      else
        r->SetFloat(&msg, f, static_cast<float>(v));
      return Status::Ok();
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      if (value == "true" || value == "1")
        r->SetBool(&msg, f, true);
      else if (value == "false" || value == "0")
        r->SetBool(&msg, f, false);
      else
        return bad("true or false");
      return Status::Ok();
    default:
      return InvalidArgumentError("--set " + flag + ": field '" + f->name() +
                                  "' cannot be set from the command line");
  }
}

std::string FieldNames(const pb::Descriptor* d) {
  std::string out;
  for (int i = 0; i < d->field_count(); ++i) out += (i ? ", " : "") + d->field(i)->name();
  return out;
}

}  // namespace

std::string ConfigFile::Where(const std::string& field_path) const {
  if (auto it = overridden.find(field_path); it != overridden.end()) return "--set " + it->second;
  if (auto it = lines.find(field_path); it != lines.end())
    return path + ":" + std::to_string(it->second);
  return path;
}

Result<ConfigFile> ParseConfig(std::string_view text, std::string name) {
  ConfigFile cfg;
  cfg.path = std::move(name);
  pb::TextFormat::Parser parser;
  Collector errors(cfg.path);
  pb::TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &cfg.config))
    return InvalidArgumentError(errors.first().empty() ? cfg.path + ": not a valid run config"
                                                       : errors.first());
  RecordLines(cfg.config, &tree, "", cfg.lines);
  return cfg;
}

Result<ConfigFile> LoadConfigFile(StorageResolver& storage, const std::string& path) {
  auto reading = [&](const Status& s) { return s.WithContext("reading the config file " + path); };
  Result<Storage*> store = storage.ForUri(path);
  if (!store.ok()) return reading(store.status());
  Result<std::string> text = ReadAll(**store, path);
  if (!text.ok()) return reading(text.status());
  REEL_ASSIGN_OR_RETURN(ConfigFile cfg, ParseConfig(*text, path));
  if (UriScheme(path) == "file") {
    std::string_view local = path;
    if (local.substr(0, 7) == "file://") local.remove_prefix(7);
    const std::filesystem::path dir = std::filesystem::path(local).parent_path();
    for (std::string& d : *cfg.config.mutable_plugin_dirs())
      if (!d.empty() && std::filesystem::path(d).is_relative())
        d = (dir / d).lexically_normal().string();
  }
  return cfg;
}

Status ApplyOverride(ConfigFile& cfg, std::string_view assignment) {
  const std::string flag(assignment);
  size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0)
    return InvalidArgumentError("--set " + flag + ": expected section.field=value");
  const std::string path = flag.substr(0, eq), value = flag.substr(eq + 1);
  pb::Message* msg = &cfg.config;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const pb::FieldDescriptor* f = msg->GetDescriptor()->FindFieldByName(part);
    if (f == nullptr)
      return InvalidArgumentError("--set " + flag + ": '" + msg->GetDescriptor()->name() +
                                  "' has no field '" + part +
                                  "' (fields: " + FieldNames(msg->GetDescriptor()) + ")");
    if (f->is_map()) {
      if (dot == std::string::npos)
        return InvalidArgumentError("--set " + flag + ": name the option, e.g. " + path +
                                    ".KEY=VALUE");
      // The config's maps (the sections' options) are string -> string; reflection sees a map as
      // its entries, each a message of key (field 1) and value (field 2).
      const pb::Descriptor* entry = f->message_type();
      if (entry->map_key()->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING ||
          entry->map_value()->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING)
        return InvalidArgumentError("--set " + flag + ": '" + part + "' is not a map of strings");
      const std::string key = path.substr(dot + 1);
      const pb::Reflection* r = msg->GetReflection();
      pb::Message* found = nullptr;
      for (int i = 0; i < r->FieldSize(*msg, f) && found == nullptr; ++i) {
        pb::Message* e = r->MutableRepeatedMessage(msg, f, i);
        if (e->GetReflection()->GetString(*e, entry->map_key()) == key) found = e;
      }
      if (found == nullptr) {
        found = r->AddMessage(msg, f);
        found->GetReflection()->SetString(found, entry->map_key(), key);
      }
      found->GetReflection()->SetString(found, entry->map_value(), value);
      break;
    }
    if (dot == std::string::npos) {
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)
        return InvalidArgumentError("--set " + flag + ": '" + part +
                                    "' is a section; name one of its fields (" +
                                    FieldNames(f->message_type()) + ")");
      REEL_RETURN_IF_ERROR(SetScalar(*msg, f, value, flag));
      break;
    }
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated())
      return InvalidArgumentError("--set " + flag + ": '" + part + "' has no fields");
    msg = msg->GetReflection()->MutableMessage(msg, f);
    start = dot + 1;
  }
  cfg.overridden[path] = flag;
  return Status::Ok();
}

std::map<std::string, std::string> OptionMap(const config::Component& c) {
  return {c.options().begin(), c.options().end()};
}
std::map<std::string, std::string> OptionMap(const config::Transport& t) {
  return {t.options().begin(), t.options().end()};
}

Status ValidateComponents(const ConfigFile& cfg, const Registry& registry,
                          const std::vector<std::string>& required) {
  struct Section {
    const char* name;
    bool present;
    const config::Component& component;
    ComponentKind kind;
  };
  const config::RunConfig& c = cfg.config;
  config::Component transport;  // the transport section's component part
  transport.set_name(c.transport().name());
  *transport.mutable_options() = c.transport().options();
  const Section sections[] = {
      {"data", c.has_data(), c.data(), ComponentKind::kDataSource},
      {"eval_data", c.has_eval_data(), c.eval_data(), ComponentKind::kDataSource},
      {"model", c.has_model(), c.model(), ComponentKind::kModel},
      {"optimizer", c.has_optimizer(), c.optimizer(), ComponentKind::kOptimizer},
      {"transport", c.has_transport(), transport, ComponentKind::kTransport},
  };
  for (const std::string& r : required) {
    for (const Section& s : sections)
      if (r == s.name && !s.present)
        return InvalidArgumentError(cfg.path + ": missing required section '" + r + "' (e.g. " + r +
                                    " { name: \"...\" }; registered: " + registry.Names(s.kind) +
                                    ")");
  }
  for (const Section& s : sections) {
    if (!s.present) continue;
    const std::string sec = s.name;
    // A transport section without a name sets only the timeouts of the transport the host
    // chooses (reel launch, mpirun: RankPlan); its options would belong to no transport.
    if (s.kind == ComponentKind::kTransport && s.component.name().empty()) {
      if (s.component.options().empty()) continue;
      return InvalidArgumentError(cfg.Where(sec) +
                                  ": section 'transport' has options but no 'name' to say which "
                                  "transport they are for (registered: " +
                                  registry.Names(s.kind) + ")");
    }
    if (s.component.name().empty())
      return InvalidArgumentError(
          cfg.Where(sec) + ": section '" + sec +
          "' is missing required field 'name' (registered: " + registry.Names(s.kind) + ")");
    const std::string& name = s.component.name();
    if (registry.Find(s.kind, name) == nullptr)
      return NotFoundError(cfg.Where(sec + ".name") + ": " + sec + ": no " +
                           ComponentKindName(s.kind) + " named '" + name +
                           "' is registered (registered: " + registry.Names(s.kind) + ")");
    Result<Options> parsed = registry.ParseComponentOptions(s.kind, name, OptionMap(s.component));
    if (!parsed.ok()) {
      // Point at the offending key's line when the message names one.
      std::string where = cfg.Where(sec);
      for (const auto& [key, unused] : s.component.options()) {
        if (parsed.status().message().find("'" + key + "'") != std::string::npos) {
          where = cfg.Where(sec + ".options." + key);
          break;
        }
      }
      return Status(parsed.status().code(), where + ": " + sec + ": " + parsed.status().message());
    }
  }
  return Status::Ok();
}

std::string ConfigToText(const config::RunConfig& config) {
  std::string out;
  pb::TextFormat::PrintToString(config, &out);
  return out;
}

Status ParseTextMessage(std::string_view text, const std::string& name, pb::Message& msg,
                        std::map<std::string, int>* lines) {
  pb::TextFormat::Parser parser;
  Collector errors(name);
  pb::TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &msg))
    return InvalidArgumentError(errors.first().empty()
                                    ? name + ": not a valid " + msg.GetDescriptor()->name()
                                    : errors.first());
  if (lines) RecordLines(msg, &tree, "", *lines);
  return Status::Ok();
}

}  // namespace reel::core
