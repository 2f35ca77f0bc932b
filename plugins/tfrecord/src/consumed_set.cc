// ConsumedSet (see consumed_set.h).
#include "consumed_set.h"

#include <charconv>
#include <iterator>

namespace reel::tfrecord {

void ConsumedSet::Insert(size_t file, uint64_t record) {
  auto& ranges = files_[file];
  // The first range starting after `record`, and the one before it (which may hold it).
  auto next = ranges.upper_bound(record);
  if (next != ranges.begin()) {
    auto prev = std::prev(next);
    if (record < prev->second) return;  // already in
    if (record == prev->second) {       // extends prev; maybe up to next
      prev->second = record + 1;
      if (next != ranges.end() && next->first == prev->second) {
        prev->second = next->second;
        ranges.erase(next);
      }
      return;
    }
  }
  if (next != ranges.end() && next->first == record + 1) {  // extends next downwards
    const uint64_t end = next->second;
    ranges.erase(next);
    ranges.emplace(record, end);
    return;
  }
  ranges.emplace(record, record + 1);
}

bool ConsumedSet::Contains(size_t file, uint64_t record) const {
  auto f = files_.find(file);
  if (f == files_.end()) return false;
  auto next = f->second.upper_bound(record);
  return next != f->second.begin() && record < std::prev(next)->second;
}

int64_t ConsumedSet::size() const {
  int64_t n = 0;
  for (const auto& [file, ranges] : files_)
    for (const auto& [begin, end] : ranges) n += static_cast<int64_t>(end - begin);
  return n;
}

std::string ConsumedSet::Encode() const {
  if (files_.empty()) return "-";
  std::string out;
  for (const auto& [file, ranges] : files_) {
    if (!out.empty()) out += '/';
    out += std::to_string(file) + ':';
    bool first = true;
    for (const auto& [begin, end] : ranges) {
      if (!first) out += ',';
      first = false;
      out += std::to_string(begin) + '-' + std::to_string(end);
    }
  }
  return out;
}

Result<ConsumedSet> ConsumedSet::Decode(std::string_view text, size_t files) {
  ConsumedSet set;
  if (text == "-") return set;
  const std::string whole(text);
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("consumed records '" + whole + "': " + why);
  };
  const char* p = text.data();
  const char* end = text.data() + text.size();
  auto number = [&](uint64_t& v) {
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || next == p) return false;
    p = next;
    return true;
  };
  int64_t last_file = -1;
  while (p < end) {
    uint64_t file = 0;
    if (!number(file) || p == end || *p++ != ':') return bad("expected FILE:");
    if (file >= files) return bad("file index " + std::to_string(file) + " out of range");
    if (static_cast<int64_t>(file) <= last_file) return bad("files out of order");
    last_file = static_cast<int64_t>(file);
    auto& ranges = set.files_[file];
    uint64_t last_end = 0;
    while (true) {
      uint64_t b = 0, e = 0;
      if (!number(b) || p == end || *p++ != '-' || !number(e)) return bad("expected BEGIN-END");
      if (e <= b || (!ranges.empty() && b <= last_end)) return bad("ranges out of order");
      ranges.emplace(b, e);
      last_end = e;
      if (p == end || *p == '/') break;
      if (*p++ != ',') return bad("expected ',' or '/'");
    }
    if (p < end) ++p;  // '/'
  }
  if (set.files_.empty()) return bad("empty");
  return set;
}

}  // namespace reel::tfrecord
