// Reading and writing machine profiles (see machine_profile.h).
#include "plan/machine_profile.h"

#include <fmt/format.h>

#include <cstdlib>
#include <set>
#include <sstream>

namespace reel::core::plan {
namespace {

// The node's rates by their keys in the file, in the order written.
const std::vector<std::pair<const char*, double Rates::*>>& NodeKeys() {
  static const std::vector<std::pair<const char*, double Rates::*>> keys = {
      {"cores", &Rates::cores},
      {"decode_frame_bytes_per_core", &Rates::decode_bytes_per_core},
      {"decode_video_bytes_per_core", &Rates::decode_video_bytes_per_core},
      {"disk_read_bytes", &Rates::disk_read_bytes},
      {"disk_write_bytes", &Rates::disk_write_bytes},
      {"reduce_bytes", &Rates::reduce_bytes},
      {"transfer_bytes", &Rates::transfer_bytes},
      {"message_latency_s", &Rates::message_latency_s},
      {"apply_params_per_core", &Rates::apply_params_per_core},
      {"s3_bytes_per_connection", &Rates::s3_bytes_per_connection},
      {"memory_bytes", &Rates::memory_bytes},
  };
  return keys;
}

Result<double> Number(const std::string& word, const std::string& where) {
  char* end = nullptr;
  const double v = std::strtod(word.c_str(), &end);
  if (word.empty() || *end != '\0' || !(v >= 0))
    return InvalidArgumentError(where + ": '" + word + "' is not a number >= 0");
  return v;
}

Result<ModelRates> ParseModel(std::istringstream& words, const std::string& where) {
  ModelRates m;
  if (!(words >> m.name)) return InvalidArgumentError(where + ": a model line needs a name");
  std::string word;
  while (words >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos)
      return InvalidArgumentError(where + ": expected KEY=VALUE, not '" + word + "'");
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "options") {
      m.options = value;
      continue;
    }
    static const std::set<std::string> kKeys = {"batch",
                                                "classes",
                                                "frames",
                                                "params",
                                                "step_examples_per_core",
                                                "forward_examples_per_core",
                                                "startup_s",
                                                "fill_s_per_record",
                                                "backward_fraction",
                                                "update_fraction"};
    if (!kKeys.count(key)) return InvalidArgumentError(where + ": unknown model key '" + key + "'");
    REEL_ASSIGN_OR_RETURN(const double v, Number(value, where + " (" + key + ")"));
    if (key == "batch")
      m.batch = static_cast<int64_t>(v);
    else if (key == "classes")
      m.classes = static_cast<int64_t>(v);
    else if (key == "frames")
      m.frames = v;
    else if (key == "params")
      m.params = v;
    else if (key == "step_examples_per_core")
      m.step_examples_per_core = v;
    else if (key == "startup_s")
      m.startup_s = v;
    else if (key == "fill_s_per_record")
      m.fill_s_per_record = v;
    else if (key == "backward_fraction")
      m.backward_fraction = v;
    else if (key == "update_fraction")
      m.update_fraction = v;
    else
      m.forward_examples_per_core = v;
  }
  if (m.batch < 1 || m.classes < 1 || !(m.step_examples_per_core > 0))
    return InvalidArgumentError(where + ": model " + m.name +
                                " needs batch, classes and step_examples_per_core");
  if ((m.backward_fraction >= 0) != (m.update_fraction >= 0) ||
      m.backward_fraction + m.update_fraction > 1)
    return InvalidArgumentError(where + ": model " + m.name +
                                " needs backward_fraction and update_fraction together, adding "
                                "up to at most 1");
  return m;
}

}  // namespace

const ModelRates* MachineProfile::Find(const std::string& name, const std::string& options,
                                       int64_t batch, int64_t classes) const {
  for (const ModelRates& m : models)
    if (m.name == name && m.options == options && m.batch == batch && m.classes == classes)
      return &m;
  return nullptr;
}

void MachineProfile::Put(ModelRates m) {
  for (ModelRates& old : models)
    if (old.name == m.name && old.options == m.options && old.batch == m.batch &&
        old.classes == m.classes) {
      old = std::move(m);
      return;
    }
  models.push_back(std::move(m));
}

Rates RatesFor(const MachineProfile& profile, const ModelRates& model) {
  Rates r = profile.node;
  r.step_examples_per_core = model.step_examples_per_core;
  r.forward_examples_per_core = model.forward_examples_per_core;
  r.frames = model.frames;
  r.startup_seconds = model.startup_s;
  r.fill_seconds_per_record = model.fill_s_per_record;
  r.backward_fraction = model.backward_fraction;
  r.update_fraction = model.update_fraction;
  if (model.frames <= 1) r.decode_bytes_per_core = profile.node.decode_video_bytes_per_core;
  return r;
}

std::string FormatProfile(const MachineProfile& p) {
  std::string out = fmt::format(
      "# reel machine profile, written by `reel plan --measure`; docs/capacity.md says what each "
      "rate is.\nreel_machine_profile {}\nreel_version {}\nhost {}\nmeasured {}\n",
      kProfileVersion, p.reel_version.empty() ? "unknown" : p.reel_version,
      p.host.empty() ? "unknown" : p.host, p.measured.empty() ? "unknown" : p.measured);
  for (const auto& [key, field] : NodeKeys()) out += fmt::format("{} {:.6g}\n", key, p.node.*field);
  for (const ModelRates& m : p.models)
    out += fmt::format(
        "model {} options={} batch={} classes={} frames={:.6g} params={:.10g} "
        "step_examples_per_core={:.6g} forward_examples_per_core={:.6g} startup_s={:.6g}{}{}\n",
        m.name, m.options, m.batch, m.classes, m.frames, m.params, m.step_examples_per_core,
        m.forward_examples_per_core, m.startup_s,
        m.fill_s_per_record > 0 ? fmt::format(" fill_s_per_record={:.6g}", m.fill_s_per_record)
                                : std::string(),
        m.backward_fraction >= 0 ? fmt::format(" backward_fraction={:.4f} update_fraction={:.4f}",
                                               m.backward_fraction, m.update_fraction)
                                 : std::string());
  return out;
}

namespace {

// The format version a profile names, checked before any other line: a newer format's keys are
// not errors of this one.
Status CheckVersion(std::string_view text, const std::string& name) {
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    std::istringstream words(line);
    std::string key, value;
    if (!(words >> key >> value) || key != "reel_machine_profile") continue;
    if (value == std::to_string(kProfileVersion)) return Status::Ok();
    return InvalidArgumentError(fmt::format(
        "{}:{}: a machine profile of format version {}; this reel reads version {}: measure "
        "again with `reel plan --measure`",
        name, n, value, kProfileVersion));
  }
  return InvalidArgumentError(name + ": not a reel machine profile (no 'reel_machine_profile " +
                              std::to_string(kProfileVersion) + "' line)");
}

}  // namespace

Result<MachineProfile> ParseProfile(std::string_view text, const std::string& name) {
  REEL_RETURN_IF_ERROR(CheckVersion(text, name));
  MachineProfile p;
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string key;
    if (!(words >> key)) continue;
    const std::string where = fmt::format("{}:{}", name, n);
    if (key == "model") {
      REEL_ASSIGN_OR_RETURN(ModelRates m, ParseModel(words, where));
      p.Put(std::move(m));
      continue;
    }
    std::string value, extra;
    if (!(words >> value) || (words >> extra))
      return InvalidArgumentError(where + ": expected '" + key + " VALUE'");
    if (key == "reel_machine_profile") {
      continue;
    } else if (key == "reel_version") {
      p.reel_version = value;
    } else if (key == "host") {
      p.host = value;
    } else if (key == "measured") {
      p.measured = value;
    } else {
      bool known = false;
      for (const auto& [k, field] : NodeKeys())
        if (key == k) {
          REEL_ASSIGN_OR_RETURN(p.node.*field, Number(value, where));
          known = true;
        }
      if (!known) return InvalidArgumentError(where + ": unknown key '" + key + "'");
    }
  }
  return p;
}

}  // namespace reel::core::plan
