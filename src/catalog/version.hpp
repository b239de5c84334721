// Versions and version ranges, as the catalog and recipes write them.
//
// A Version is dotted numbers with an optional packaging revision:
//   "12.6"  "12.6.3"  "9.5.1.17"  "22.04"  "2.23.4-1"
// Versions compare numerically part by part, missing parts counting as 0
// ("12.4" < "12.10", "12.6" == "12.6.0"); the revision ("-1") breaks ties.
//
// A VersionRange selects versions (grammar in docs/catalog.md):
//   ""  or "*"            any version
//   "12.6"  or "=12.6"    prefix: 12.6, 12.6.0, 12.6.3 (not 12.60)
//   ">=12.0,<12.4"        comma = and
//   "<=12.3"              up to and including every 12.3.x
//   ">12.3"  "<12.4"  "!=12.5"
//   "12.0 - 12.3"         inclusive range, same as ">=12.0,<=12.3" (spaces required)
//   "11.8 || 12.4"        either
// Every comparison looks only at as many parts as the bound has, so bounds
// behave like prefixes: "<=12.3" admits 12.3.2 and ">12.3" does not.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sb::catalog {

class Version {
 public:
  static constexpr int kMaxParts = 6;

  // nullopt when `text` is not a version; `error` (if given) says why.
  static std::optional<Version> parse(std::string_view text, std::string* error = nullptr);

  const std::string& str() const { return text_; }
  int size() const { return size_; }
  uint32_t part(int i) const { return parts_[i]; }
  bool has_revision() const { return revision_ >= 0; }

  // Compares this version cut to the length of `bound` (and ignoring the
  // revision unless `bound` has one) with `bound`: the order behind prefix
  // matching and every range operator.
  int compare_to_bound(const Version& bound) const;
  bool matches(const Version& prefix) const { return compare_to_bound(prefix) == 0; }

  friend std::strong_ordering operator<=>(const Version& a, const Version& b);
  friend bool operator==(const Version& a, const Version& b) { return (a <=> b) == 0; }

 private:
  std::array<uint32_t, kMaxParts> parts_{};
  int size_ = 0;
  int32_t revision_ = -1;  // -1 = none
  std::string text_;
};

class VersionRange {
 public:
  VersionRange() = default;  // any version

  // nullopt when `text` is not a range; `error` says why.
  static std::optional<VersionRange> parse(std::string_view text, std::string* error = nullptr);
  // The alternatives as one range: ["11.8", "12.4"] -> "11.8 || 12.4".
  static std::optional<VersionRange> parse_any_of(const std::vector<std::string>& texts,
                                                  std::string* error = nullptr);

  bool contains(const Version& v) const;
  bool is_any() const { return alternatives_.empty(); }
  // The text as written ("*" for any).
  const std::string& str() const { return text_; }

 private:
  enum class Op : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
  struct Term {
    Op op;
    Version bound;
  };
  static bool holds(const Term& t, const Version& v);

  std::vector<std::vector<Term>> alternatives_;  // or of ands; empty = any
  std::string text_ = "*";
};

}  // namespace sb::catalog
