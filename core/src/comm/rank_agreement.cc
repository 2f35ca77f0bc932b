// Comparing the ranks' settings (see reel/core/rank_agreement.h).
#include "reel/core/rank_agreement.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "reel/core/evaluator.h"

namespace reel::core {
namespace {

void PutString(std::string& out, const std::string& s) {
  const uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out += s;
}

std::string Encode(const RankSettings& settings) {
  std::string out;
  for (const auto& [name, value] : settings) {
    PutString(out, name);
    PutString(out, value);
  }
  return out;
}

// Every rank runs the same build, so a malformed encoding is a bug; it reads as no settings.
std::optional<RankSettings> Decode(std::string_view in) {
  RankSettings out;
  auto get = [&in](std::string& s) {
    uint64_t n;
    if (in.size() < sizeof n) return false;
    std::memcpy(&n, in.data(), sizeof n);
    in.remove_prefix(sizeof n);
    if (in.size() < n) return false;
    s.assign(in.substr(0, n));
    in.remove_prefix(n);
    return true;
  };
  while (!in.empty()) {
    std::string name, value;
    if (!get(name) || !get(value)) return std::nullopt;
    out.emplace(std::move(name), std::move(value));
  }
  return out;
}

std::string ValueOf(const RankSettings& settings, const std::string& name) {
  auto it = settings.find(name);
  return it == settings.end() ? "(unset)" : it->second;
}

}  // namespace

Status CheckRanksAgree(Communicator& comm, const RankSettings& mine, std::string_view why,
                       std::chrono::milliseconds timeout) {
  if (comm.size() == 1) return Status::Ok();
  Result<std::vector<std::string>> all = GatherBytes(comm, Encode(mine), timeout);
  if (!all.ok()) return all.status().WithContext("comparing the ranks' settings");
  std::vector<RankSettings> ranks;
  for (size_t r = 0; r < all->size(); ++r) {
    std::optional<RankSettings> s = Decode((*all)[r]);
    if (!s) return InternalError("rank " + std::to_string(r) + "'s settings are malformed");
    ranks.push_back(std::move(*s));
  }
  // Every name any rank has, in order: each rank finds the same first difference.
  RankSettings names;
  for (const RankSettings& s : ranks)
    for (const auto& [name, value] : s) names.emplace(name, "");
  for (const auto& [name, unused] : names) {
    const std::string lead = ValueOf(ranks[0], name);
    for (size_t r = 1; r < ranks.size(); ++r) {
      const std::string theirs = ValueOf(ranks[r], name);
      if (theirs != lead)
        return InvalidArgumentError("every rank must use the same " + name + " (rank 0: " + lead +
                                    ", rank " + std::to_string(r) + ": " + theirs +
                                    "): " + std::string(why));
    }
  }
  return Status::Ok();
}

}  // namespace reel::core
