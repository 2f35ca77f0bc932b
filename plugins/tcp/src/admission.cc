// Admitting unauthenticated connections (see admission.h).
#include "admission.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace reel::tcp {

PendingHandshakes::Handle PendingHandshakes::Add(std::string address, void* connection) {
  entries_.push_back({std::move(address), Stage::kAwaitingHello, false, connection});
  return std::prev(entries_.end());
}

void PendingHandshakes::Remove(Handle h) {
  if (h->shed) --shed_;
  entries_.erase(h);
}

void* PendingHandshakes::Shed() {
  std::map<std::string, int> per_address;
  for (const Entry& e : entries_)
    if (!e.shed) ++per_address[e.address];
  if (per_address.empty()) return nullptr;
  const std::string busiest =
      std::max_element(per_address.begin(), per_address.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  Entry* victim = nullptr;
  for (Entry& e : entries_) {
    if (e.shed || e.address != busiest) continue;
    if (e.stage == Stage::kAwaitingHello) {
      victim = &e;
      break;
    }
    if (victim == nullptr) victim = &e;  // the oldest being authenticated, if none is silent
  }
  victim->shed = true;
  ++shed_;
  return victim->connection;
}

bool DropReport::Add(DropReason reason, const std::string& from, const std::string& detail) {
  const auto i = static_cast<size_t>(reason);
  ++count_[i];
  last_[i] = detail;
  // The address without its port: a flood comes from many ports of few hosts.
  const size_t colon = from.rfind(':');
  ++by_address_[colon == std::string::npos ? from : from.substr(0, colon)];
  return ++total_ == 1;
}

std::string DropReport::Take(std::chrono::milliseconds interval, int64_t handshake_ms,
                             int max_pending) {
  if (total_ == 0) return "";
  std::vector<std::pair<int64_t, std::string>> sources;
  for (const auto& [address, n] : by_address_) sources.emplace_back(n, address);
  std::sort(sources.rbegin(), sources.rend());
  std::string from;
  constexpr size_t kMaxSources = 3;
  for (size_t i = 0; i < sources.size() && i < kMaxSources; ++i)
    from += (i ? ", " : "") + (sources[i].second.empty() ? "?" : sources[i].second) + ": " +
            std::to_string(sources[i].first);
  if (sources.size() > kMaxSources)
    from += ", " + std::to_string(sources.size() - kMaxSources) + " more address(es)";
  const auto seconds = std::chrono::duration<double>(interval).count();
  char span[32];
  std::snprintf(span, sizeof(span), "%g s", seconds);
  std::string line = "dropped " + std::to_string(total_) +
                     " connection(s) that did not authenticate in the last " + span + " (from " +
                     from + "):";
  auto what = [&](DropReason r) -> std::string {
    switch (r) {
      case DropReason::kShed:
        return "shed to keep at most " + std::to_string(max_pending) + " handshakes pending";
      case DropReason::kTimedOut:
        return "silent or slow past the handshake deadline of " + std::to_string(handshake_ms) +
               " ms";
      case DropReason::kNotTheProtocol:
        return "not the protocol";
      case DropReason::kFailedAuth:
        return "failed authentication (a different secret?)";
      case DropReason::kHungUp:
        return "hung up during the handshake";
      case DropReason::kLocalFailure:
        return "failed on this rank's side";
      case DropReason::kCount:
        break;
    }
    return "";
  };
  bool first = true;
  for (size_t i = 0; i < count_.size(); ++i) {
    if (count_[i] == 0) continue;
    const auto reason = static_cast<DropReason>(i);
    line += std::string(first ? " " : ", ") + std::to_string(count_[i]) + " " + what(reason);
    const bool says_more = reason != DropReason::kShed && reason != DropReason::kTimedOut &&
                           reason != DropReason::kFailedAuth;
    if (says_more && !last_[i].empty()) line += " (last: " + last_[i] + ")";
    first = false;
  }
  total_ = 0;
  count_ = {};
  for (auto& s : last_) s.clear();
  by_address_.clear();
  return line;
}

}  // namespace reel::tcp
