// A small flag parser for subcommands: `--name value`, `--name=value`, repeated flags, boolean
// switches and positional words. Unknown flags are an InvalidArgument naming the flag.
#ifndef REEL_CORE_CLI_ARGS_H_
#define REEL_CORE_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reel/status.h"

namespace reel::cli {

class Args {
 public:
  // Declares a flag that takes a value (`--out DIR`); `repeated` ones collect every occurrence.
  Args& Value(const std::string& name, bool repeated = false) {
    specs_[name] = repeated ? Kind::kRepeated : Kind::kValue;
    return *this;
  }
  // Declares a switch (`--json`).
  Args& Switch(const std::string& name) {
    specs_[name] = Kind::kSwitch;
    return *this;
  }

  Status Parse(const std::vector<std::string>& words) {
    for (size_t i = 0; i < words.size(); ++i) {
      const std::string& w = words[i];
      if (w == "--") {
        positional_.insert(positional_.end(), words.begin() + i + 1, words.end());
        break;
      }
      if (w.size() < 3 || w.compare(0, 2, "--") != 0) {
        positional_.push_back(w);
        continue;
      }
      std::string name = w.substr(2), value;
      bool inline_value = false;
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      auto it = specs_.find(name);
      if (it == specs_.end()) return InvalidArgumentError("unknown flag '--" + name + "'");
      if (it->second == Kind::kSwitch) {
        if (inline_value) return InvalidArgumentError("flag '--" + name + "' takes no value");
        values_[name].push_back("true");
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= words.size())
          return InvalidArgumentError("flag '--" + name + "' needs a value");
        value = words[++i];
      }
      if (it->second == Kind::kValue && values_.count(name))
        return InvalidArgumentError("flag '--" + name + "' given twice");
      values_[name].push_back(value);
    }
    return Status::Ok();
  }

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second.back();
  }
  std::vector<std::string> GetAll(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
  }
  // A flag as an integer; InvalidArgument naming the flag when it is not one.
  Result<int64_t> GetInt(const std::string& name, int64_t fallback) const {
    if (!Has(name)) return fallback;
    std::string v = Get(name);
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0')
      return InvalidArgumentError("flag '--" + name + "': '" + v + "' is not an integer");
    return static_cast<int64_t>(n);
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  enum class Kind { kValue, kRepeated, kSwitch };
  std::map<std::string, Kind> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_ARGS_H_
