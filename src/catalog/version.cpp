#include "catalog/version.hpp"

#include <algorithm>
#include <charconv>

#include "util/text.hpp"

namespace sb::catalog {

namespace {

constexpr std::string_view kBlanks = " \t";

bool set_error(std::string* error, std::string message) {
  if (error) *error = std::move(message);
  return false;
}

// Splits `s` at every occurrence of `sep`.
std::vector<std::string_view> split(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string_view::npos; start = at + sep.size())
    out.push_back(s.substr(start, at - start));
  out.push_back(s.substr(start));
  return out;
}

bool parse_number(std::string_view s, uint32_t& out) {
  if (s.empty() || s.size() > 9) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::optional<Version> Version::parse(std::string_view text, std::string* error) {
  Version v;
  v.text_ = std::string(text);
  std::string_view numbers = text;
  if (size_t dash = text.find('-'); dash != std::string_view::npos) {
    uint32_t rev = 0;
    if (!parse_number(text.substr(dash + 1), rev)) {
      set_error(error, "bad version '" + v.text_ + "': the revision after '-' must be a number");
      return std::nullopt;
    }
    v.revision_ = static_cast<int32_t>(rev);
    numbers = text.substr(0, dash);
  }
  auto parts = split(numbers, ".");
  if (parts.size() > kMaxParts) {
    set_error(error, "bad version '" + v.text_ + "': more than 6 parts");
    return std::nullopt;
  }
  for (auto part : parts) {
    if (!parse_number(part, v.parts_[v.size_])) {
      set_error(error,
                "bad version '" + v.text_ + "': expected dotted numbers such as 12.6 or 9.5.1.17");
      return std::nullopt;
    }
    ++v.size_;
  }
  return v;
}

std::strong_ordering operator<=>(const Version& a, const Version& b) {
  for (int i = 0; i < Version::kMaxParts; ++i)  // unused parts are 0
    if (auto c = a.parts_[i] <=> b.parts_[i]; c != 0) return c;
  return std::max(a.revision_, 0) <=> std::max(b.revision_, 0);
}

int Version::compare_to_bound(const Version& bound) const {
  for (int i = 0; i < bound.size_; ++i)
    if (parts_[i] != bound.parts_[i]) return parts_[i] < bound.parts_[i] ? -1 : 1;
  if (bound.revision_ < 0) return 0;
  int32_t mine = std::max(revision_, 0);
  return mine == bound.revision_ ? 0 : (mine < bound.revision_ ? -1 : 1);
}

bool VersionRange::holds(const Term& t, const Version& v) {
  int c = v.compare_to_bound(t.bound);
  switch (t.op) {
    case Op::kEq:
      return c == 0;
    case Op::kNe:
      return c != 0;
    case Op::kLt:
      return c < 0;
    case Op::kLe:
      return c <= 0;
    case Op::kGt:
      return c > 0;
    case Op::kGe:
      return c >= 0;
  }
  return false;
}

bool VersionRange::contains(const Version& v) const {
  if (alternatives_.empty()) return true;
  for (const auto& all : alternatives_) {
    bool ok = true;
    for (const auto& t : all)
      if (!holds(t, v)) {
        ok = false;
        break;
      }
    if (ok) return true;
  }
  return false;
}

std::optional<VersionRange> VersionRange::parse(std::string_view text, std::string* error) {
  VersionRange range;
  std::string_view whole = trim_view(text, kBlanks);
  if (whole.empty() || whole == "*") return range;
  range.text_ = std::string(whole);

  auto bound = [&](std::string_view s, Op op, std::vector<Term>& into) {
    s = trim_view(s, kBlanks);
    std::string why;
    auto v = Version::parse(s, &why);
    if (!v) return set_error(error, "bad version range '" + range.text_ + "': " + why);
    into.push_back({op, std::move(*v)});
    return true;
  };

  for (auto alternative : split(whole, "||")) {
    alternative = trim_view(alternative, kBlanks);
    if (alternative == "*") return VersionRange{};  // one alternative admits everything
    std::vector<Term> terms;
    for (auto term : split(alternative, ",")) {
      term = trim_view(term, kBlanks);
      if (auto dash = term.find(" - "); dash != std::string_view::npos) {
        if (!bound(term.substr(0, dash), Op::kGe, terms) ||
            !bound(term.substr(dash + 3), Op::kLe, terms))
          return std::nullopt;
        continue;
      }
      static constexpr std::pair<std::string_view, Op> kOps[] = {
          {">=", Op::kGe}, {"<=", Op::kLe}, {"!=", Op::kNe}, {">", Op::kGt},
          {"<", Op::kLt},  {"=", Op::kEq},  {"", Op::kEq}};
      for (const auto& [spelling, op] : kOps) {
        if (!term.starts_with(spelling)) continue;
        if (!bound(term.substr(spelling.size()), op, terms)) return std::nullopt;
        break;
      }
    }
    range.alternatives_.push_back(std::move(terms));
  }
  return range;
}

std::optional<VersionRange> VersionRange::parse_any_of(const std::vector<std::string>& texts,
                                                       std::string* error) {
  std::string joined;
  for (const auto& t : texts) joined += (joined.empty() ? "" : " || ") + t;
  if (texts.empty()) {
    set_error(error, "an empty list admits no version; write \"*\" for any");
    return std::nullopt;
  }
  return parse(joined, error);
}

}  // namespace sb::catalog
