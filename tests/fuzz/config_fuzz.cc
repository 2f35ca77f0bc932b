// libFuzzer target: the run config in protobuf text format with `--set` overrides
// (core/src/config). The input is a config file followed by override lines:
//
//   trainer { steps: 10 }
//   --set model.options.hidden=128
//   --set trainer.learning_rate.base=0.01
//
// (every line from the first one starting with "--set " on is an override). A config that
// parses and takes its overrides must print to text that parses again to the same message: what
// `reel train` writes into checkpoints is read back by `--resume`.
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "reel/core/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reel::core;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSet = "--set ";
  size_t split = input.substr(0, kSet.size()) == kSet ? 0 : input.find("\n" + std::string(kSet));
  const std::string_view text = input.substr(0, split == std::string_view::npos ? size : split);
  std::vector<std::string_view> overrides;
  for (size_t pos = text.size(); pos < size;) {
    while (pos < size && input[pos] == '\n') ++pos;
    size_t end = input.find('\n', pos);
    if (end == std::string_view::npos) end = size;
    std::string_view line = input.substr(pos, end - pos);
    if (line.substr(0, kSet.size()) == kSet) overrides.push_back(line.substr(kSet.size()));
    pos = end;
  }

  reel::Result<ConfigFile> cfg = ParseConfig(text, "fuzz.pbtxt");
  if (!cfg.ok()) return 0;
  for (std::string_view o : overrides) (void)ApplyOverride(*cfg, o);
  for (const auto& [field, unused] : cfg->lines) (void)cfg->Where(field);
  const std::string printed = ConfigToText(cfg->config);
  reel::Result<ConfigFile> again = ParseConfig(printed, "printed");
  // Compared as messages (serialized bytes of equal maps may differ in entry order), with a nan
  // a config file may hold equal to itself.
  google::protobuf::util::DefaultFieldComparator nan_equal;
  nan_equal.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&nan_equal);
  if (!again.ok() || !differ.Compare(again->config, cfg->config)) std::abort();
  return 0;
}
