// Option schemas and validated option values.
//
// Every component declares its options as a schema: name, type, default, help, and whether the
// user must set it. A config section ("name" + key/values, all given as text) is checked against
// the schema by ParseOptions(): an unknown key, a value of the wrong type or a missing required
// option is an InvalidArgument naming the key. The result holds a typed value for every option
// in the schema (defaults filled in), so components read options without error handling.
//
// Thread-safety: values; a const Options may be read from any thread.
#ifndef REEL_OPTIONS_H_
#define REEL_OPTIONS_H_

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "reel/status.h"

namespace reel {

// The type an option's text must parse as.
enum class OptionType { kBool, kInt, kFloat, kString, kStringList };

// "bool", "int", "float", "string", "string list": how schemas and errors name a type.
inline std::string_view OptionTypeName(OptionType t) {
  switch (t) {
    case OptionType::kBool:
      return "bool";
    case OptionType::kInt:
      return "int";
    case OptionType::kFloat:
      return "float";
    case OptionType::kString:
      return "string";
    case OptionType::kStringList:
      return "string list";
  }
  return "?";
}

// One option of a schema; build it with the helpers below.
struct OptionSpec {
  std::string name;
  OptionType type = OptionType::kString;
  std::string default_value;  // as text, parsed like a user's value; ignored when required
  std::string help;
  bool required = false;
};

// A component's options, in the order `reel plugins show` lists them.
using OptionSchema = std::vector<OptionSpec>;

// Builders that keep schemas readable: {IntOption("hidden", 256, "units per direction"), ...}.
inline OptionSpec BoolOption(std::string name, bool def, std::string help) {
  return {std::move(name), OptionType::kBool, def ? "true" : "false", std::move(help), false};
}
inline OptionSpec IntOption(std::string name, int64_t def, std::string help) {
  return {std::move(name), OptionType::kInt, std::to_string(def), std::move(help), false};
}
inline OptionSpec FloatOption(std::string name, double def, std::string help) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), def);  // shortest text that round-trips
  return {std::move(name), OptionType::kFloat, std::string(buf, res.ptr), std::move(help), false};
}
inline OptionSpec StringOption(std::string name, std::string def, std::string help) {
  return {std::move(name), OptionType::kString, std::move(def), std::move(help), false};
}
// A comma-separated list, e.g. "a/*.tfrecord,b/*.tfrecord".
inline OptionSpec StringListOption(std::string name, std::string def, std::string help) {
  return {std::move(name), OptionType::kStringList, std::move(def), std::move(help), false};
}
inline OptionSpec Required(OptionSpec spec) {
  spec.required = true;
  return spec;
}

// A parsed value: the alternative matches the OptionType (kStringList: vector<string>).
using OptionValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>>;

// Parsed options: a typed value for every option of the schema (ParseOptions fills it).
class Options {
 public:
  bool Has(std::string_view name) const { return values_.find(name) != values_.end(); }

  // Typed accessors. REQUIRES: the option is in the schema these options were parsed with and has
  // that type (a programming error otherwise: returns a zero value).
  bool GetBool(std::string_view name) const { return Get<bool>(name); }
  int64_t GetInt(std::string_view name) const { return Get<int64_t>(name); }
  double GetFloat(std::string_view name) const { return Get<double>(name); }
  std::string GetString(std::string_view name) const { return Get<std::string>(name); }
  std::vector<std::string> GetStringList(std::string_view name) const {
    return Get<std::vector<std::string>>(name);
  }
  // The text the user gave (or the default), for echoing configs back.
  const std::map<std::string, std::string, std::less<>>& texts() const { return texts_; }

  void Set(std::string name, std::string text, OptionValue value) {
    texts_[name] = std::move(text);
    values_[std::move(name)] = std::move(value);
  }

 private:
  template <typename T>
  T Get(std::string_view name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return T{};
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    return T{};
  }
  std::map<std::string, OptionValue, std::less<>> values_;
  std::map<std::string, std::string, std::less<>> texts_;
};

// Parses `text` as `type`; InvalidArgument "option 'k': 'abc' is not an int" on failure.
inline Result<OptionValue> ParseOptionValue(const OptionSpec& spec, std::string_view text) {
  auto bad = [&]() {
    return InvalidArgumentError("option '" + spec.name + "': '" + std::string(text) + "' is not " +
                                (spec.type == OptionType::kInt ? "an " : "a ") +
                                std::string(OptionTypeName(spec.type)));
  };
  std::string s(text);
  switch (spec.type) {
    case OptionType::kBool:
      if (s == "true" || s == "1" || s == "yes") return OptionValue{true};
      if (s == "false" || s == "0" || s == "no") return OptionValue{false};
      return bad();
    case OptionType::kInt: {
      if (s.empty()) return bad();
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE) return bad();
      return OptionValue{static_cast<int64_t>(v)};
    }
    case OptionType::kFloat: {
      if (s.empty()) return bad();
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(s.c_str(), &end);
      if (*end != '\0' || errno == ERANGE) return bad();
      return OptionValue{v};
    }
    case OptionType::kString:
      return OptionValue{std::move(s)};
    case OptionType::kStringList: {
      std::vector<std::string> items;
      size_t start = 0;
      while (start <= s.size() && !s.empty()) {
        size_t comma = s.find(',', start);
        if (comma == std::string::npos) comma = s.size();
        if (comma > start) items.push_back(s.substr(start, comma - start));
        start = comma + 1;
      }
      return OptionValue{std::move(items)};
    }
  }
  return bad();
}

// Validates `given` against `schema` and fills in defaults. `where` prefixes errors, e.g.
// "model 'bilstm_video'". Unknown keys list the known ones, so a typo is easy to spot.
inline Result<Options> ParseOptions(const OptionSchema& schema,
                                    const std::map<std::string, std::string>& given,
                                    std::string_view where = {}) {
  auto prefix = [&](const Status& s) { return where.empty() ? s : s.WithContext(where); };
  for (const auto& [key, text] : given) {
    bool known = false;
    for (const auto& spec : schema) known = known || spec.name == key;
    if (!known) {
      std::string names;
      for (const auto& spec : schema) names += (names.empty() ? "" : ", ") + spec.name;
      return prefix(InvalidArgumentError("unknown option '" + key +
                                         "' (known: " + (names.empty() ? "none" : names) + ")"));
    }
  }
  Options out;
  for (const auto& spec : schema) {
    auto it = given.find(spec.name);
    if (it == given.end() && spec.required)
      return prefix(
          InvalidArgumentError("missing required option '" + spec.name + "' (" + spec.help + ")"));
    const std::string& text = it == given.end() ? spec.default_value : it->second;
    Result<OptionValue> v = ParseOptionValue(spec, text);
    if (!v.ok()) return prefix(v.status());
    out.Set(spec.name, text, std::move(*v));
  }
  return out;
}

}  // namespace reel

#endif  // REEL_OPTIONS_H_
