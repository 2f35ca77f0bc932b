// Slurm host lists and task counts (see reel/core/slurm_host_list.h).
#include "reel/core/slurm_host_list.h"

#include <charconv>

namespace reel::core {
namespace {

Status Bad(std::string_view list, const std::string& why) {
  return InvalidArgumentError("Slurm host list '" + std::string(list) + "': " + why);
}

// A whole unsigned decimal number, digits only.
bool ParseCount(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 18) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// The numbers inside one pair of brackets ("01-04,07"), each as text with its padding.
Result<std::vector<std::string>> ExpandRanges(std::string_view list, std::string_view ranges) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t comma = ranges.find(',', start);
    if (comma == std::string_view::npos) comma = ranges.size();
    const std::string_view item = ranges.substr(start, comma - start);
    const size_t dash = item.find('-');
    const std::string_view lo_text = item.substr(0, dash);
    const std::string_view hi_text =
        dash == std::string_view::npos ? lo_text : item.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    if (!ParseCount(lo_text, lo) || !ParseCount(hi_text, hi))
      return Bad(list, "'[" + std::string(ranges) + "]' holds '" + std::string(item) +
                           "', not a number or a range A-B");
    if (hi < lo) return Bad(list, "the range '" + std::string(item) + "' runs backwards");
    if (hi - lo >= kMaxSlurmHosts)
      return Bad(list, "more than " + std::to_string(kMaxSlurmHosts) + " hosts");
    const size_t width = lo_text.size() > 1 && lo_text[0] == '0' ? lo_text.size() : 0;
    for (uint64_t n = lo; n <= hi; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out.push_back(std::move(digits));
      if (out.size() > kMaxSlurmHosts)
        return Bad(list, "more than " + std::to_string(kMaxSlurmHosts) + " hosts");
    }
    start = comma + 1;
  }
  return out;
}

// One host expression (no top-level comma): literal text and bracket groups, multiplied out.
Status ExpandOne(std::string_view list, std::string_view expr, std::vector<std::string>& hosts) {
  if (expr.empty()) return Bad(list, "an empty host name");
  std::vector<std::string> names{""};
  size_t i = 0;
  while (i < expr.size()) {
    if (expr[i] == ']') return Bad(list, "a ']' without its '['");
    if (expr[i] != '[') {
      const size_t next = std::min(expr.find('[', i), expr.find(']', i));
      const std::string_view text = expr.substr(i, next - i);
      for (std::string& n : names) n += text;
      i = next == std::string_view::npos ? expr.size() : next;
      continue;
    }
    const size_t close = expr.find(']', i);
    if (close == std::string_view::npos) return Bad(list, "a '[' without its ']'");
    if (expr.find('[', i + 1) < close) return Bad(list, "brackets inside brackets");
    REEL_ASSIGN_OR_RETURN(std::vector<std::string> numbers,
                          ExpandRanges(list, expr.substr(i + 1, close - i - 1)));
    if (names.size() * numbers.size() > kMaxSlurmHosts)
      return Bad(list, "more than " + std::to_string(kMaxSlurmHosts) + " hosts");
    std::vector<std::string> product;
    for (const std::string& n : names)
      for (const std::string& d : numbers) product.push_back(n + d);
    names = std::move(product);
    i = close + 1;
  }
  if (hosts.size() + names.size() > kMaxSlurmHosts)
    return Bad(list, "more than " + std::to_string(kMaxSlurmHosts) + " hosts");
  hosts.insert(hosts.end(), names.begin(), names.end());
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ExpandSlurmHostList(std::string_view list) {
  std::vector<std::string> hosts;
  if (list.empty()) return Bad(list, "empty");
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (i < list.size() && (list[i] != ',' || depth > 0)) continue;
    REEL_RETURN_IF_ERROR(ExpandOne(list, list.substr(start, i - start), hosts));
    start = i + 1;
  }
  return hosts;
}

Result<std::vector<int>> ExpandSlurmTaskCounts(std::string_view counts) {
  std::vector<int> out;
  const auto bad = [&](std::string_view item) {
    return InvalidArgumentError("Slurm task counts '" + std::string(counts) + "': '" +
                                std::string(item) + "' is not N or N(xM) with N, M >= 1");
  };
  size_t start = 0;
  while (start <= counts.size()) {
    size_t comma = counts.find(',', start);
    if (comma == std::string_view::npos) comma = counts.size();
    const std::string_view item = counts.substr(start, comma - start);
    std::string_view n_text = item, times_text = "1";
    if (const size_t paren = item.find("(x"); paren != std::string_view::npos) {
      if (item.back() != ')') return bad(item);
      n_text = item.substr(0, paren);
      times_text = item.substr(paren + 2, item.size() - paren - 3);
    }
    uint64_t n = 0, times = 0;
    if (!ParseCount(n_text, n) || !ParseCount(times_text, times) || n < 1 || times < 1 ||
        n > (1 << 20) || out.size() + times > kMaxSlurmHosts)
      return bad(item);
    out.insert(out.end(), times, static_cast<int>(n));
    start = comma + 1;
  }
  return out;
}

}  // namespace reel::core
