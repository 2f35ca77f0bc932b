// Re-cutting the servers' state for another number of servers (see shard_states.h).
#include "shard_states.h"

#include <algorithm>
#include <cstring>

#include "async_config.h"

namespace reel::async_sgd {
namespace {

// A shard's part: its version, then its rule's state (UpdateRule::SaveState) of `size` parameters.
struct ParsedShard {
  int64_t version = 0;
  UpdateRule::State rule;
};

Result<ParsedShard> Parse(std::string_view part, int shard, int64_t size) {
  const std::string which = "async_sgd state: shard " + std::to_string(shard);
  ParsedShard p;
  if (part.size() < sizeof p.version) return DataLossError(which + " is truncated");
  std::memcpy(&p.version, part.data(), sizeof p.version);
  part.remove_prefix(sizeof p.version);
  Result<UpdateRule::State> rule = UpdateRule::ParseState(part);
  if (!rule.ok()) return DataLossError(which + ": " + rule.status().message());
  p.rule = std::move(*rule);
  for (const std::vector<float>& m : p.rule.moments)
    if (!m.empty() && static_cast<int64_t>(m.size()) != size)
      return DataLossError(which + " holds " + std::to_string(m.size()) + " moments for its " +
                           std::to_string(size) + " parameters");
  return p;
}

}  // namespace

Result<std::vector<std::string>> ReshardStates(std::span<const std::string_view> parts,
                                               int64_t total, int servers) {
  const int old = static_cast<int>(parts.size());
  if (old < 1 || servers < 1 || total < servers)
    return InvalidArgumentError("async_sgd: cannot re-cut " + std::to_string(old) +
                                " shard states of " + std::to_string(total) + " parameters into " +
                                std::to_string(servers));
  int64_t version = 0, steps = 0;
  std::vector<float> whole[2];
  for (int s = 0; s < old; ++s) {
    REEL_ASSIGN_OR_RETURN(ParsedShard p,
                          Parse(parts[static_cast<size_t>(s)], s, ShardOf(total, old, s).size));
    version = std::max(version, p.version);
    steps = std::max(steps, p.rule.steps);
    for (int k = 0; k < 2; ++k) {
      const std::vector<float>& m = p.rule.moments[k];
      if (s > 0 && m.empty() != whole[k].empty())
        return DataLossError("async_sgd state: shard " + std::to_string(s) + " has " +
                             (m.empty() ? "no" : "a") + " moment vector " + std::to_string(k) +
                             " where shard 0 has " + (whole[k].empty() ? "none" : "one"));
      whole[k].insert(whole[k].end(), m.begin(), m.end());
    }
  }
  std::vector<std::string> out;
  for (int s = 0; s < servers; ++s) {
    const ShardRange r = ShardOf(total, servers, s);
    auto cut = [&r](const std::vector<float>& m) {
      return m.empty() ? std::span<const float>()
                       : std::span<const float>(m).subspan(static_cast<size_t>(r.offset),
                                                           static_cast<size_t>(r.size));
    };
    std::string part(reinterpret_cast<const char*>(&version), sizeof version);
    part += UpdateRule::EncodeState(steps, cut(whole[0]), cut(whole[1]));
    out.push_back(std::move(part));
  }
  return out;
}

}  // namespace reel::async_sgd
