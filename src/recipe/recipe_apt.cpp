// The apt keys of a recipe: `repositories:` and `pins:` (recipe-wide or per
// apt layer), a layer's `recommends:`, `base:` and `priority:`. What they
// mean is in docs/apt.md; here they are read strictly, at file:line:col.
#include <algorithm>
#include <utility>

#include "recipe/parse.hpp"

namespace sb::detail {

namespace {

std::vector<std::string> words(const yaml::Reader& r, const YAML::Node& n, const std::string& what) {
  std::vector<std::string> out = r.string_or_strings(n, what);
  if (out.empty()) r.fail(n, what + " is an empty list");
  for (const auto& w : out)
    if (w.empty() || w.find_first_of(" \t") != std::string::npos || w.find("${") != std::string::npos)
      r.fail(n, what + " holds words such as trixie or main, not '" + w + "'");
  return out;
}

AptRepositorySpec parse_repository(const yaml::Reader& r, const YAML::Node& n, const fs::path& base) {
  AptRepositorySpec s;
  s.where = r.at(n);
  if (n.IsScalar()) {
    std::string word = r.string(n, "a repository");
    if (word != "default")
      r.fail(n, "a repository is a map {url: ..., suites: ..., components: ...} or the word 'default', not '" +
                    word + "'",
             "'default' means the machine's apt configuration, else the public archives");
    s.is_default = true;
    return s;
  }
  if (n.IsMap() && n["default"]) {
    // {default: true, components: [main, contrib, non-free]}: the default
    // repositories with other components (the machine's sources name only
    // main, say, and the layer needs non-free).
    r.check_keys(n, "a default repository", {"default", "components"}, {"default", "components"});
    if (!r.boolean(n["default"], "repository default"))
      r.fail(n["default"], "'default: false' names no repository",
             "write the word 'default', or {default: true, components: [...]}, or a map with a url");
    s.is_default = true;
    s.components = words(r, n["components"], "repository components");
    return s;
  }
  r.check_keys(n, "a repository", {"url", "suites", "components", "keyring", "trusted", "check_valid_until", "priority"},
               {"url"});
  s.url = r.string(n["url"], "repository url");
  bool scheme = s.url.rfind("http://", 0) == 0 || s.url.rfind("https://", 0) == 0 || s.url.rfind("file:///", 0) == 0;
  if (!scheme || s.url.find_first_of(" \t") != std::string::npos)
    r.fail(n["url"], "repository url must be an http://, https:// or file:/// URL, not '" + s.url + "'");
  if (s.url.find("${") != std::string::npos) r.fail(n["url"], "repository url cannot use ${variables}");
  while (s.url.size() > 8 && s.url.back() == '/') s.url.pop_back();
  if (auto v = n["suites"]) {
    s.suites = words(r, v, "repository suites");
    for (const auto& suite : s.suites)
      if (suite == "./" || suite.front() == '/' || suite.back() == '/' || suite.find("..") != std::string::npos)
        r.fail(v, "suite '" + suite + "' is not a suite name (flat repositories such as './' are not supported)",
               "publish the repository with dists/SUITE/");
  }
  s.components = n["components"] ? words(r, n["components"], "repository components") : std::vector<std::string>{"main"};
  if (auto v = n["keyring"]) {
    s.keyring = r.string(v, "repository keyring");
    if (s.keyring.empty()) r.fail(v, "repository keyring is empty");
    s.keyring_file = fs::path(s.keyring).is_absolute() ? fs::path(s.keyring) : base / s.keyring;
  }
  if (auto v = n["trusted"]) s.trusted = r.boolean(v, "repository trusted");
  if (s.trusted && n["keyring"])
    r.fail(n["trusted"], "a repository is either checked against a keyring or trusted, not both",
           "drop 'trusted: true' to check its signature, or 'keyring:' to take it unchecked");
  if (auto v = n["check_valid_until"]) s.check_valid_until = r.boolean(v, "repository check_valid_until");
  if (auto v = n["priority"]) {
    int64_t p = r.integer(v, "repository priority");
    if (p < -10000 || p > 10000) r.fail(v, "repository priority must be between -10000 and 10000");
    s.priority = static_cast<int>(p);
  }
  return s;
}

}  // namespace

std::vector<AptRepositorySpec> parse_apt_repositories(const yaml::Reader& r, const YAML::Node& n, const fs::path& base) {
  r.expect_list(n, "'repositories'");
  std::vector<AptRepositorySpec> out;
  bool seen_default = false;
  for (const auto& item : n) {
    out.push_back(parse_repository(r, item, base));
    if (out.back().is_default && std::exchange(seen_default, true)) r.fail(item, "'default' is listed twice");
  }
  if (out.empty()) r.fail(n, "'repositories' is an empty list", "leave it out for the default repositories");
  return out;
}

std::vector<AptPin> parse_apt_pins(const yaml::Reader& r, const YAML::Node& n) {
  r.expect_list(n, "'pins'");
  std::vector<AptPin> out;
  for (const auto& item : n) {
    r.check_keys(item, "a pin", {"origin", "priority"}, {"origin", "priority"});
    AptPin p;
    p.where = r.at(item);
    p.origin = r.string(item["origin"], "pin origin");
    if (p.origin.empty()) r.fail(item["origin"], "pin origin is empty", "the Origin: field of the repository's Release");
    int64_t prio = r.integer(item["priority"], "pin priority");
    if (prio < -10000 || prio > 10000) r.fail(item["priority"], "pin priority must be between -10000 and 10000");
    p.priority = static_cast<int>(prio);
    for (const auto& other : out)
      if (other.origin == p.origin) r.fail(item["origin"], "origin '" + p.origin + "' is pinned twice");
    out.push_back(p);
  }
  return out;
}

std::string parse_apt_priority(const yaml::Reader& r, const YAML::Node& n) {
  std::string p = r.string(n, "'priority'");
  if (p != "required" && p != "important" && p != "standard") {
    std::string best = suggest(p, {"required", "important", "standard"});
    r.fail(n, "'priority' is required, important or standard, not '" + p + "'" +
                  (best.empty() ? "" : " (did you mean '" + best + "'?)"),
           "it adds every package of that Priority and above, as debootstrap's variants do");
  }
  return p;
}

bool is_apt_spec(const LayerSpec& l) {
  return !l.apt.empty() || (l.from == "apt" && !l.use.empty()) ||
         std::any_of(l.use.begin(), l.use.end(), is_os_component);
}

void validate_apt_keys(const Recipe& r) {
  auto keyrings = [](const std::vector<AptRepositorySpec>& repos, const std::string& whose) {
    for (const auto& repo : repos) {
      std::error_code ec;
      if (!repo.keyring.empty() && !fs::is_regular_file(repo.keyring_file, ec))
        throw InputError(repo.where, whose + "keyring '" + repo.keyring + "' not found (looked for " +
                                         repo.keyring_file.string() + ")",
                         "keyring paths are relative to the recipe that names them");
    }
  };
  keyrings(r.repositories, "");
  for (const auto& l : r.layers) {
    if (!is_apt_spec(l))
      for (const char* k : {"repositories", "pins", "recommends", "base", "priority"})
        if (l.key_where.count(k))
          throw InputError(l.at(k), "layer '" + l.name + "': '" + k + "' applies to apt layers",
                           "give the layer 'apt:' packages, or 'use: debian' / 'use: ubuntu'");
    keyrings(l.repositories, "layer '" + l.name + "': ");
  }
}

}  // namespace sb::detail
