// Re-cutting the servers' state for another number of servers (see shard_states.h).
#include "shard_states.h"

#include <algorithm>
#include <cstring>

#include "async_config.h"

namespace reel::async_sgd {
namespace {

struct ParsedShard {
  int64_t version = 0, steps = 0;
  std::vector<float> moments[2];  // each empty or one float per parameter of the shard
};

Result<ParsedShard> Parse(std::string_view part, int shard, int64_t size) {
  auto truncated = [shard] {
    return DataLossError("async_sgd state: shard " + std::to_string(shard) + " is truncated");
  };
  auto take = [&part](void* dst, size_t n) {
    if (part.size() < n) return false;
    if (n > 0) std::memcpy(dst, part.data(), n);
    part.remove_prefix(n);
    return true;
  };
  ParsedShard p;
  if (!take(&p.version, sizeof p.version) || !take(&p.steps, sizeof p.steps)) return truncated();
  for (std::vector<float>& m : p.moments) {
    uint64_t n = 0;
    if (!take(&n, sizeof n) || n > part.size() / sizeof(float)) return truncated();
    if (n != 0 && static_cast<int64_t>(n) != size)
      return DataLossError("async_sgd state: shard " + std::to_string(shard) + " holds " +
                           std::to_string(n) + " moments for its " + std::to_string(size) +
                           " parameters");
    m.resize(n);
    take(m.data(), n * sizeof(float));
  }
  if (!part.empty())
    return DataLossError("async_sgd state: shard " + std::to_string(shard) + " has trailing bytes");
  return p;
}

void Put(std::string& out, const void* v, size_t n) { out.append(static_cast<const char*>(v), n); }

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
    steps = std::max(steps, p.steps);
    for (int k = 0; k < 2; ++k) {
      if (s > 0 && p.moments[k].empty() != whole[k].empty())
        return DataLossError("async_sgd state: shard " + std::to_string(s) + " has " +
                             (p.moments[k].empty() ? "no" : "a") + " moment vector " +
                             std::to_string(k) + " where shard 0 has " +
                             (whole[k].empty() ? "none" : "one"));
      whole[k].insert(whole[k].end(), p.moments[k].begin(), p.moments[k].end());
    }
  }
  std::vector<std::string> out;
  for (int s = 0; s < servers; ++s) {
    const ShardRange r = ShardOf(total, servers, s);
    std::string part;
    Put(part, &version, sizeof version);
    Put(part, &steps, sizeof steps);
    for (const std::vector<float>& m : whole) {
      const uint64_t n = m.empty() ? 0 : static_cast<uint64_t>(r.size);
      Put(part, &n, sizeof n);
      if (n > 0) Put(part, m.data() + r.offset, n * sizeof(float));
    }
    out.push_back(std::move(part));
  }
  return out;
}

}  // namespace reel::async_sgd
