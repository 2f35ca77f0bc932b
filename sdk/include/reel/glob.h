// Glob matching shared by every Storage: '*' (any run), '?' (one character) and '[...]' (a class,
// '[!...]' negated) within one '/'-separated segment; other characters match themselves.
#ifndef REEL_GLOB_H_
#define REEL_GLOB_H_

#include <string_view>

namespace reel {

// True if `pattern` has a wildcard.
inline bool HasGlob(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

// The part of `pattern` before its first wildcard: the prefix to list under.
inline std::string_view GlobPrefix(std::string_view pattern) {
  size_t pos = pattern.find_first_of("*?[");
  return pos == std::string_view::npos ? pattern : pattern.substr(0, pos);
}

// True when `text` matches `pattern` whole, by the rules above (no wildcard matches '/').
inline bool GlobMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star_p = std::string_view::npos, star_t = 0;
  auto match_class = [&](size_t& pp, char c) -> int {  // 1 match, 0 no, -1 malformed
    size_t i = pp + 1;
    bool negate = i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^');
    if (negate) ++i;
    bool hit = false, first = true;
    for (; i < pattern.size() && (first || pattern[i] != ']'); ++i, first = false) {
      if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
        hit = hit || (pattern[i] <= c && c <= pattern[i + 2]);
        i += 2;
      } else {
        hit = hit || pattern[i] == c;
      }
    }
    if (i >= pattern.size()) return -1;
    pp = i + 1;
    return hit != negate ? 1 : 0;
  };
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star_p = p++;
      star_t = t;
      continue;
    }
    if (p < pattern.size() && text[t] != '/') {
      if (pattern[p] == '?') {
        ++p;
        ++t;
        continue;
      }
      if (pattern[p] == '[') {
        size_t pp = p;
        int m = match_class(pp, text[t]);
        if (m == 1) {
          p = pp;
          ++t;
          continue;
        }
        if (m == -1 && text[t] == '[') {
          ++p;
          ++t;
          continue;
        }
      } else if (pattern[p] == text[t]) {
        ++p;
        ++t;
        continue;
      }
    } else if (p < pattern.size() && pattern[p] == '/' && text[t] == '/') {
      ++p;
      ++t;
      star_p = std::string_view::npos;
      continue;
    }
    // Backtrack: let the last '*' swallow one more character, but never a '/'.
    if (star_p != std::string_view::npos && text[star_t] != '/') {
      p = star_p + 1;
      t = ++star_t;
      continue;
    }
    return false;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace reel

#endif  // REEL_GLOB_H_
