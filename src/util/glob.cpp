#include "util/glob.hpp"

#include <optional>
#include <vector>

namespace sb {

namespace {

constexpr size_t npos = std::string_view::npos;

// A character class: [abc], [a-z], [!a-z] (or [^a-z]); a ']' first is a
// member, '\\' quotes.
struct CharClass {
  bool negate = false;
  std::vector<std::pair<unsigned char, unsigned char>> ranges;
  size_t end = 0;  // the index of its closing ']'
  bool has(char c) const {
    bool in = false;
    for (auto [lo, hi] : ranges) in |= static_cast<unsigned char>(c) >= lo && static_cast<unsigned char>(c) <= hi;
    return in != negate;
  }
};

// The class that opens at p[open]; nullopt when it is not closed.
std::optional<CharClass> parse_class(std::string_view p, size_t open) {
  CharClass cls;
  size_t i = open + 1;
  if (i < p.size() && (p[i] == '!' || p[i] == '^')) cls.negate = true, ++i;
  for (bool first = true;; first = false) {
    if (i >= p.size()) return std::nullopt;
    if (p[i] == ']' && !first) {
      cls.end = i;
      return cls;
    }
    auto one = [&]() -> std::optional<unsigned char> {
      if (p[i] == '\\' && ++i >= p.size()) return std::nullopt;
      return static_cast<unsigned char>(p[i++]);
    };
    auto lo = one();
    if (!lo) return std::nullopt;
    auto hi = lo;
    if (i + 1 < p.size() && p[i] == '-' && p[i + 1] != ']') {
      ++i;
      if (!(hi = one())) return std::nullopt;
    }
    cls.ranges.emplace_back(*lo, *hi);
  }
}

// One path component against one pattern component ('*' backtracks).
bool match_component(std::string_view p, std::string_view s) {
  size_t pi = 0, si = 0, star = npos, star_s = 0;
  while (si < s.size()) {
    if (pi < p.size()) {
      char c = p[pi];
      if (c == '*') {
        star = ++pi;
        star_s = si;
        continue;
      }
      size_t next = pi + 1;
      bool ok;
      if (c == '?') {
        ok = true;
      } else if (c == '[') {
        auto cls = parse_class(p, pi);  // checked by glob_error
        ok = cls && cls->has(s[si]);
        next = cls ? cls->end + 1 : p.size();
      } else if (c == '\\') {
        ok = p[pi + 1] == s[si];
        next = pi + 2;
      } else {
        ok = c == s[si];
      }
      if (ok) {
        pi = next;
        ++si;
        continue;
      }
    }
    if (star == npos) return false;
    pi = star;
    si = ++star_s;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find('/', start);
    out.push_back(s.substr(start, end == npos ? npos : end - start));
    if (end == npos) return out;
    start = end + 1;
  }
}

bool match_parts(const std::vector<std::string_view>& p, size_t i, const std::vector<std::string_view>& s,
                 size_t j) {
  if (i == p.size()) return j == s.size();
  if (p[i] == "**") {
    for (size_t k = j; k <= s.size(); ++k)
      if (match_parts(p, i + 1, s, k)) return true;
    return false;
  }
  return j < s.size() && match_component(p[i], s[j]) && match_parts(p, i + 1, s, j + 1);
}

}  // namespace

std::string glob_error(std::string_view p) {
  if (p.empty()) return "an empty pattern";
  auto parts = split(p);
  for (size_t n = 0; n < parts.size(); ++n) {
    std::string_view c = parts[n];
    if (c.empty() && n > 0) return "an empty path component ('//' or a trailing '/')";
    if (c != "**" && c.find("**") != npos) return "'**' that is not a whole path component (write '*' within one)";
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i] == '\\') {
        if (++i == c.size()) return "a '\\' with nothing after it to quote";
      } else if (c[i] == '[') {
        auto cls = parse_class(c, i);
        if (!cls) return "an unclosed '['";
        for (auto [lo, hi] : cls->ranges)
          if (hi < lo) return std::string("a reversed range '") + char(lo) + "-" + char(hi) + "'";
        i = cls->end;
      }
    }
  }
  return "";
}

bool glob_match(std::string_view pattern, std::string_view path) {
  if (!glob_error(pattern).empty()) return false;
  return match_parts(split(pattern), 0, split(path), 0);
}

}  // namespace sb
