#include "fetch/pip/version.hpp"

#include <algorithm>
#include <regex>

#include "util/error.hpp"
#include "util/number.hpp"
#include "util/text.hpp"

namespace sb::pip {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return isdigit(static_cast<unsigned char>(c)); });
}


// The release without trailing zeros: 1.0.0 == 1.
std::vector<int64_t> stripped(std::vector<int64_t> r) {
  while (r.size() > 1 && r.back() == 0) r.pop_back();
  return r;
}

}  // namespace

std::optional<Version> Version::try_parse(std::string_view text) {
  static const std::regex re(
      R"(^v?(?:([0-9]+)!)?([0-9]+(?:\.[0-9]+)*))"
      R"((?:[-_.]?(alpha|a|beta|b|preview|pre|c|rc)[-_.]?([0-9]+)?)?)"
      R"((?:-([0-9]+)|[-_.]?(post|rev|r)[-_.]?([0-9]+)?)?)"
      R"((?:[-_.]?(dev)[-_.]?([0-9]+)?)?)"
      R"((?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?$)");
  std::string s = ascii_lower(trim(text));
  std::smatch m;
  if (s.size() > 256 || !std::regex_match(s, m, re)) return std::nullopt;
  Version v;
  // A number of the version ("" is 0). PEP 440 puts no bound on them; one
  // past int64 makes the text no version here, rather than a wrapped number
  // or a bare std::out_of_range.
  bool fits = true;
  auto number = [&](const std::string& digits) -> int64_t {
    if (digits.empty()) return 0;
    auto n = parse_integer<int64_t>(digits);
    fits = fits && n.has_value();
    return n.value_or(0);
  };
  v.epoch = number(m[1]);
  std::string rel = m[2];
  for (size_t pos = 0; pos <= rel.size();) {
    size_t dot = rel.find('.', pos);
    if (dot == std::string::npos) dot = rel.size();
    v.release.push_back(number(rel.substr(pos, dot - pos)));
    pos = dot + 1;
  }
  if (m[3].matched) {
    std::string l = m[3];
    char c = l == "alpha" || l == "a" ? 'a' : l == "beta" || l == "b" ? 'b' : 'c';
    v.pre = std::make_pair(c, number(m[4]));
  }
  if (m[5].matched) v.post = number(m[5]);
  else if (m[6].matched) v.post = number(m[7]);
  if (m[8].matched) v.dev = number(m[9]);
  if (m[10].matched) {
    std::string loc = m[10];
    for (size_t pos = 0; pos <= loc.size();) {
      size_t e = loc.find_first_of("-_.", pos);
      if (e == std::string::npos) e = loc.size();
      v.local.push_back(loc.substr(pos, e - pos));
      pos = e + 1;
    }
  }
  if (!fits) return std::nullopt;
  return v;
}

Version Version::parse(std::string_view text) {
  if (auto v = try_parse(text)) return *v;
  throw Error("'" + std::string(text) + "' is not a PEP 440 version");
}

Version Version::public_version() const {
  Version v = *this;
  v.local.clear();
  return v;
}

Version Version::base_version() const {
  Version v;
  v.epoch = epoch;
  v.release = release;
  return v;
}

std::string Version::str() const {
  std::string s;
  if (epoch) s += std::to_string(epoch) + "!";
  for (size_t i = 0; i < release.size(); ++i) s += (i ? "." : "") + std::to_string(release[i]);
  if (pre) s += (pre->first == 'c' ? std::string("rc") : std::string(1, pre->first)) + std::to_string(pre->second);
  if (post) s += ".post" + std::to_string(*post);
  if (dev) s += ".dev" + std::to_string(*dev);
  for (size_t i = 0; i < local.size(); ++i) s += (i ? "." : "+") + local[i];
  return s;
}

std::strong_ordering operator<=>(const Version& a, const Version& b) {
  if (auto c = a.epoch <=> b.epoch; c != 0) return c;
  if (auto c = stripped(a.release) <=> stripped(b.release); c != 0) return c;
  // Pre-release slot: a dev release of the final sorts before its pre-releases.
  auto pre_key = [](const Version& v) -> std::pair<int, std::pair<char, int64_t>> {
    if (!v.pre && !v.post && v.dev) return {-1, {0, 0}};
    if (!v.pre) return {1, {0, 0}};
    return {0, *v.pre};
  };
  if (auto c = pre_key(a) <=> pre_key(b); c != 0) return c;
  auto post_key = [](const Version& v) { return v.post ? std::make_pair(1, *v.post) : std::make_pair(0, int64_t{0}); };
  if (auto c = post_key(a) <=> post_key(b); c != 0) return c;
  auto dev_key = [](const Version& v) { return v.dev ? std::make_pair(0, *v.dev) : std::make_pair(1, int64_t{0}); };
  if (auto c = dev_key(a) <=> dev_key(b); c != 0) return c;
  // Local: none sorts first; numeric segments beat alphanumeric ones.
  for (size_t i = 0; i < std::min(a.local.size(), b.local.size()); ++i) {
    bool an = all_digits(a.local[i]), bn = all_digits(b.local[i]);
    if (an != bn) return an ? std::strong_ordering::greater : std::strong_ordering::less;
    if (an) {
      if (int c = compare_digit_strings(a.local[i], b.local[i]); c != 0) return c <=> 0;
    } else if (auto c = a.local[i].compare(b.local[i]) <=> 0; c != 0) {
      return c;
    }
  }
  return a.local.size() <=> b.local.size();
}

bool Specifier::names_prerelease() const {
  if (op == "!=" || op == "===") return false;
  auto v = Version::try_parse(version);
  return v && v->is_prerelease();
}

std::string Specifier::str() const { return op + version + (wildcard ? ".*" : ""); }

bool Specifier::contains(const Version& v) const {
  if (op == "===") return ascii_lower(version) == ascii_lower(v.str());
  Version s = Version::parse(version);
  auto prefix_match = [&](const Version& spec) {
    // ==1.2.*: the candidate's release (padded with zeros) starts with 1.2.
    Version pub = v.public_version();
    if (pub.epoch != spec.epoch) return false;
    std::vector<int64_t> r = pub.release;
    r.resize(std::max(r.size(), spec.release.size()), 0);
    if (!std::equal(spec.release.begin(), spec.release.end(), r.begin())) return false;
    if (spec.pre || spec.post || spec.dev) {  // "==1.0rc1.*" is unusual; compare the whole spec
      Version cut = pub;
      cut.release.resize(spec.release.size());
      return cut.pre == spec.pre && cut.post == spec.post && cut.dev == spec.dev;
    }
    return true;
  };
  auto equal = [&]() {
    if (wildcard) return prefix_match(s);
    // A spec without a local part ignores the candidate's.
    return s.local.empty() ? v.public_version() == s : v == s;
  };
  if (op == "==") return equal();
  if (op == "!=") return !equal();
  if (op == "~=") {
    Version prefix = s.base_version();
    prefix.release.pop_back();
    return v >= s && prefix_match(prefix);
  }
  Version pv = v.public_version();
  if (op == ">=") return pv >= s;
  if (op == "<=") return pv <= s;
  if (op == "<") {
    if (!(pv < s)) return false;
    // <3.0 excludes 3.0's pre-releases unless the spec is one.
    return s.is_prerelease() || !pv.is_prerelease() || pv.base_version() != s.base_version();
  }
  if (op == ">") {
    if (!(pv > s)) return false;
    // >3.0 excludes 3.0's post-releases unless the spec is one (and its local versions).
    if (!s.is_postrelease() && pv.is_postrelease() && pv.base_version() == s.base_version()) return false;
    return !(v.base_version() == s.base_version() && !v.local.empty() && v.public_version() == s);
  }
  throw Error("unknown version operator '" + op + "'");
}

SpecifierSet SpecifierSet::parse(std::string_view text) {
  SpecifierSet set;
  std::string t(text);
  for (size_t pos = 0; pos <= t.size();) {
    size_t comma = t.find(',', pos);
    if (comma == std::string::npos) comma = t.size();
    std::string clause = trim(std::string_view(t).substr(pos, comma - pos));
    pos = comma + 1;
    if (clause.empty()) {
      if (comma == t.size() && set.specs_.empty()) break;
      throw Error("empty clause in version specifier '" + t + "'");
    }
    Specifier s;
    for (const char* op : {"===", "~=", "==", "!=", "<=", ">=", "<", ">"})
      if (clause.starts_with(op)) {
        s.op = op;
        break;
      }
    if (s.op.empty()) throw Error("'" + clause + "' in '" + t + "' has no version operator (==, >=, ~=, ...)");
    s.version = trim(std::string_view(clause).substr(s.op.size()));
    if (s.op != "===") {
      if (s.version.ends_with(".*")) {
        if (s.op != "==" && s.op != "!=") throw Error("'" + clause + "': only == and != take a '.*'");
        s.wildcard = true;
        s.version.resize(s.version.size() - 2);
      }
      auto v = Version::try_parse(s.version);
      if (!v) throw Error("'" + clause + "' in '" + t + "': '" + s.version + "' is not a PEP 440 version");
      if (s.op == "~=" && v->release.size() < 2) throw Error("'" + clause + "': ~= needs at least two release parts");
    }
    set.specs_.push_back(s);
  }
  return set;
}

bool SpecifierSet::names_prerelease() const {
  return std::any_of(specs_.begin(), specs_.end(), [](const Specifier& s) { return s.names_prerelease(); });
}

bool SpecifierSet::contains(const Version& v, bool prereleases) const {
  if (v.is_prerelease() && !prereleases && !names_prerelease()) return false;
  return std::all_of(specs_.begin(), specs_.end(), [&](const Specifier& s) { return s.contains(v); });
}

std::string SpecifierSet::str() const {
  std::string s;
  for (const auto& sp : specs_) s += (s.empty() ? "" : ",") + sp.str();
  return s;
}

std::string normalize_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += static_cast<char>(tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

}  // namespace sb::pip
