// Admitting unauthenticated connections (see admission.h).
#include "admission.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
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
  // Silent connections go before any that sent a hello (a rank mid-authentication is one). Among
  // that stage's, the address with the most handshakes pending pays, and on a tie the one whose
  // candidate is older: a flood of one connection per address (127.0.0.2, .3, ...) sheds its own
  // oldest, whatever the addresses' spelling (a tie once went to the lexicographically first,
  // 127.0.0.1, where the local ranks come from).
  struct Load {
    int pending = 0;
    Entry* oldest = nullptr;  // of the stage being shed
    size_t age = 0;           // its position in entries_ (smaller: older)
  };
  for (const Stage stage : {Stage::kAwaitingHello, Stage::kAuthenticating}) {
    std::map<std::string_view, Load> per_address;
    size_t position = 0;
    for (Entry& e : entries_) {
      ++position;
      if (e.shed) continue;
      Load& load = per_address[e.address];
      ++load.pending;
      if (e.stage == stage && load.oldest == nullptr) {
        load.oldest = &e;
        load.age = position;
      }
    }
    const Load* victim = nullptr;
    for (const auto& [address, load] : per_address) {
      if (load.oldest == nullptr) continue;
      if (victim == nullptr || load.pending > victim->pending ||
          (load.pending == victim->pending && load.age < victim->age))
        victim = &load;
    }
    if (victim == nullptr) continue;
    victim->oldest->shed = true;
    ++shed_;
    return victim->oldest->connection;
  }
  return nullptr;
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
