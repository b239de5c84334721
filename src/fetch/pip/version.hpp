// PEP 440 versions and version specifiers, as pip (packaging) reads them:
// epochs, pre-, post- and dev-releases, local versions, `~=`, `==X.*`, `!=`,
// `===`, and the rule that pre-releases match only when asked for.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sb::pip {

class Version {
 public:
  // Parses and normalises ("1.0RC1" == "1.0rc1", "v1.0-1" == "1.0.post1");
  // throws sb::Error on text that is not a PEP 440 version.
  static Version parse(std::string_view text);
  static std::optional<Version> try_parse(std::string_view text);

  int64_t epoch = 0;
  std::vector<int64_t> release;          // 1.2.3
  std::optional<std::pair<char, int64_t>> pre;  // 'a', 'b' or 'c' (rc), number
  std::optional<int64_t> post, dev;
  std::vector<std::string> local;        // "ubuntu", "1" (numbers compared as numbers)

  bool is_prerelease() const { return pre.has_value() || dev.has_value(); }
  bool is_postrelease() const { return post.has_value(); }
  Version public_version() const;        // without the local part
  Version base_version() const;          // epoch and release only
  std::string str() const;               // the normalised form

  friend std::strong_ordering operator<=>(const Version& a, const Version& b);
  friend bool operator==(const Version& a, const Version& b) { return (a <=> b) == 0; }
};

// One clause: an operator and a version ("==1.2.*" keeps the wildcard).
struct Specifier {
  std::string op;       // ~= == != <= >= < > ===
  std::string version;  // as written (without ".*")
  bool wildcard = false;

  // Whether `v` matches, ignoring the pre-release rule (see SpecifierSet).
  bool contains(const Version& v) const;
  bool names_prerelease() const;
  std::string str() const;
};

// A comma-separated set of clauses; all must hold.
class SpecifierSet {
 public:
  static SpecifierSet parse(std::string_view text);  // "" = anything
  bool empty() const { return specs_.empty(); }
  // With `prereleases` unset, a pre-release matches only when a clause names
  // one (">=2.0b1"); the caller widens to pre-releases when nothing else fits.
  bool contains(const Version& v, bool prereleases = false) const;
  bool names_prerelease() const;
  const std::vector<Specifier>& specs() const { return specs_; }
  std::string str() const;
  void add(const SpecifierSet& other) { specs_.insert(specs_.end(), other.specs_.begin(), other.specs_.end()); }

 private:
  std::vector<Specifier> specs_;
};

// PEP 503 name normalisation: lower case, runs of -_. become one '-'.
std::string normalize_name(std::string_view name);

}  // namespace sb::pip
