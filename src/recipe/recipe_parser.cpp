// parse_recipe_file(): one recipe file's YAML -> a partial Recipe, strictly:
// every key known, every value of its type, at file:line:col.
#include <algorithm>
#include <cctype>

#include "recipe/parse.hpp"
#include "recipe/variables.hpp"
#include "util/glob.hpp"
#include "util/status.hpp"
#include "util/yaml_reader.hpp"

namespace sb::detail {

namespace {

using yaml::Reader;

// Records where each key of `map` was written.
std::map<std::string, SourceLocation> key_places(const Reader& r, const YAML::Node& map) {
  std::map<std::string, SourceLocation> out;
  for (auto it = map.begin(); it != map.end(); ++it) out[it->first.Scalar()] = r.at(it->first);
  return out;
}

// A string that may hold ${vars}: checked for syntax now, expanded later.
Text text(const Reader& r, const YAML::Node& n, std::string_view what) {
  Text t{r.string(n, what), r.at(n)};
  variable_names(t.value, t.where);
  return t;
}

std::vector<std::pair<std::string, Text>> env_list(const Reader& r, const YAML::Node& n, std::string_view what) {
  r.expect_map(n, what);
  std::vector<std::pair<std::string, Text>> out;
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string k = r.string(it->first, "an environment variable name");
    if (k.empty() || k.find('=') != std::string::npos)
      r.fail(it->first, "bad environment variable name '" + k + "'");
    for (const auto& [seen, v] : out)
      if (seen == k) r.fail(it->first, "duplicate key '" + k + "' in " + std::string(what));
    out.emplace_back(k, text(r, it->second, std::string(what) + "." + k));
  }
  return out;
}

std::string word(const Reader& r, const YAML::Node& n, std::string_view what) {
  std::string s = r.string(n, what);
  if (s.empty() || s.find_first_of("/ \t") != std::string::npos)
    r.fail(n, std::string(what) + " '" + s + "' must be a non-empty word");
  return s;
}

CopySpec parse_copy(const Reader& r, const YAML::Node& n, const fs::path& base) {
  r.check_keys(n, "a copy item", {"src", "dst", "mode"}, {"src", "dst"});
  CopySpec c;
  c.where = r.at(n);
  c.base = base;
  c.src = r.string(n["src"], "copy.src");
  c.dst = r.string(n["dst"], "copy.dst");
  if (c.src.empty()) r.fail(n["src"], "copy.src is empty");
  if (c.dst.empty() || c.dst[0] != '/')
    r.fail(n["dst"], "copy.dst must be an absolute path in the image, not '" + c.dst + "'");
  if (("/" + c.dst + "/").find("/../") != std::string::npos) r.fail(n["dst"], "copy.dst must not contain '..'");
  if (n["mode"]) c.mode = r.octal_mode(n["mode"], "copy.mode");
  return c;
}

void parse_owner(const Reader& r, const YAML::Node& n, LayerSpec& l) {
  std::string owner = r.string(n, "owner");
  auto colon = owner.find(':');
  try {
    size_t used = 0;
    std::string u = owner.substr(0, colon);
    l.uid = static_cast<uint32_t>(std::stoul(u, &used));
    if (used != u.size()) throw std::invalid_argument(u);
    std::string g = colon == std::string::npos ? u : owner.substr(colon + 1);
    l.gid = static_cast<uint32_t>(std::stoul(g, &used));
    if (used != g.size()) throw std::invalid_argument(g);
  } catch (const std::exception&) {
    r.fail(n, "owner must be numeric 'UID:GID', not '" + owner + "'");
  }
}

std::string image_path(const Reader& r, const YAML::Node& n, std::string_view what) {
  std::string p = r.string(n, what);
  if (p.empty() || p[0] != '/') r.fail(n, std::string(what) + " must be an absolute path in the image, not '" + p + "'");
  if (("/" + p + "/").find("/../") != std::string::npos) r.fail(n, std::string(what) + " must not contain '..'");
  return p;
}

// "90", "90s", "15m", "2h" -> seconds.
int64_t duration(const Reader& r, const YAML::Node& n, std::string_view what) {
  std::string s = r.string(n, what);
  int64_t unit = 1;
  if (!s.empty() && (s.back() == 's' || s.back() == 'm' || s.back() == 'h')) {
    unit = s.back() == 'h' ? 3600 : s.back() == 'm' ? 60 : 1;
    s.pop_back();
  }
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used, 10);
    if (used == s.size() && v > 0) return v * unit;
  } catch (const std::exception&) {
  }
  r.fail(n, std::string(what) + " is a positive duration such as 600, 90s, 15m or 2h, not '" + r.string(n, what) + "'");
}

// `build:` {run, env, workdir, network, cache, user, timeout}. `run` is one
// shell line, or a list whose items are shell lines or argv lists.
BuildSpec parse_build(const Reader& r, const YAML::Node& v) {
  r.check_keys(v, "'build'", {"env", "run", "workdir", "network", "cache", "user", "timeout"});
  BuildSpec b;
  if (auto e = v["env"]) b.env = env_list(r, e, "build.env");
  if (auto run = v["run"]) {
    if (run.IsScalar()) {
      b.run.push_back(text(r, run, "build.run"));
      b.shape.push_back({false, 1});
    } else {
      r.expect_list(run, "build.run");
      for (const auto& cmd : run) {
        if (!cmd.IsSequence()) {
          b.run.push_back(text(r, cmd, "a build.run command"));
          b.shape.push_back({false, 1});
          continue;
        }
        if (cmd.size() == 0) r.fail(cmd, "an argv command in build.run is empty");
        for (const auto& word : cmd) b.run.push_back(text(r, word, "a word of a build.run command"));
        b.shape.push_back({true, cmd.size()});
      }
    }
    if (b.run.empty()) r.fail(run, "build.run has no commands");
  }
  if (auto w = v["workdir"]) b.workdir = image_path(r, w, "build.workdir");
  if (auto w = v["network"]) b.network = r.boolean(w, "build.network");
  if (auto c = v["cache"]) {
    std::vector<YAML::Node> items;
    if (c.IsSequence())
      for (const auto& item : c) items.push_back(item);
    else
      items.push_back(c);
    // A path (the recipe's own cache), or {path, shared: NAME} (a cache every
    // recipe naming NAME shares, as BuildKit's cache mount `id=`).
    for (const auto& item : items) {
      std::string shared;
      if (item.IsMap()) {
        r.check_keys(item, "a build.cache item", {"path", "shared"});
        if (!item["path"]) r.fail(item, "a build.cache item needs 'path'");
        if (auto n = item["shared"]) {
          shared = r.string(n, "build.cache shared");
          bool ok = !shared.empty() && shared.size() <= 64 && shared != "." && shared != "..";
          for (char c : shared) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_');
          if (!ok) r.fail(n, "build.cache shared is a name of letters, digits, '.', '-' and '_', not '" + shared + "'");
        }
      }
      // (Not a YAML::Node assigned twice: that would write into `item`.)
      const YAML::Node path = item.IsMap() ? item["path"] : item;
      std::string p = image_path(r, path, "a build.cache directory");
      if (p == "/") r.fail(path, "build.cache cannot be the image root");
      b.cache.push_back(p);
      if (!shared.empty()) b.shared_caches[p] = shared;
    }
  }
  if (auto u = v["user"]) {
    std::string s = r.string(u, "build.user");
    if (s == "root") s = "0:0";
    auto colon = s.find(':');
    try {
      size_t used = 0;
      std::string uid = s.substr(0, colon);
      b.uid = static_cast<uint32_t>(std::stoul(uid, &used));
      if (used != uid.size()) throw std::invalid_argument(uid);
      std::string gid = colon == std::string::npos ? uid : s.substr(colon + 1);
      b.gid = static_cast<uint32_t>(std::stoul(gid, &used));
      if (used != gid.size()) throw std::invalid_argument(gid);
    } catch (const std::exception&) {
      r.fail(u, "build.user must be numeric 'UID[:GID]' or root, not '" + s + "'");
    }
  }
  if (auto t = v["timeout"]) b.timeout = duration(r, t, "build.timeout");
  return b;
}

// `source:` {path} | {url, sha256} | {git, ref} | {debian, version, suite}.
SourceDecl parse_source(const Reader& r, const YAML::Node& n, const fs::path& base) {
  r.check_keys(n, "'source'", {"path", "url", "sha256", "git", "ref", "debian", "version", "suite"});
  SourceDecl s;
  s.where = r.at(n);
  s.base = base;
  int kinds = 0;
  if (auto v = n["path"]) s.path = r.string(v, "source.path"), ++kinds;
  if (auto v = n["url"]) s.url = r.string(v, "source.url"), ++kinds;
  if (auto v = n["git"]) s.git = text(r, v, "source.git").value, ++kinds;  // ${vars}: expanded per point
  if (auto v = n["debian"]) {
    s.debian = r.string(v, "source.debian"), ++kinds;
    // A source package name (Debian Policy 5.6.1): lowercase letters, digits, + - .
    if (s.debian.size() < 2 || !std::isalnum(static_cast<unsigned char>(s.debian[0])) ||
        s.debian.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+-.") != std::string::npos)
      r.fail(v, "source.debian is a Debian source package name (lowercase letters, digits, '+', '-', '.'), not '" +
                    s.debian + "'");
  }
  if (kinds != 1 || (n["path"] && s.path.empty()) || (n["url"] && s.url.empty()) || (n["git"] && s.git.empty()))
    r.fail(n, "'source' names one non-empty of path, url, git or debian",
           "source: {path: src/}, {url: https://.../x.tar.gz, sha256: <64 hex>}, {git: URL, ref: COMMIT} or "
           "{debian: PACKAGE, version: VERSION, suite: SUITE}");
  for (const char* k : {"version", "suite"})
    if (auto v = n[k]) {
      std::string value = text(r, v, std::string("source.") + k).value;  // ${vars}: expanded per point
      if (s.debian.empty()) r.fail(v, std::string("source.") + k + " goes with source.debian");
      if (value.empty() || value.find_first_of(" \t\n/") != std::string::npos)
        r.fail(v, std::string("source.") + k + " is one word, not '" + value + "'");
      (std::string_view(k) == "version" ? s.version : s.suite) = value;
    }
  if (auto v = n["sha256"]) {
    s.sha256 = r.string(v, "source.sha256");
    if (s.sha256.size() != 64 || s.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
      r.fail(v, "source.sha256 is 64 lowercase hex digits, not '" + s.sha256 + "'");
    if (s.url.empty()) r.fail(v, "source.sha256 pins an archive: it goes with source.url");
  } else if (!s.url.empty()) {
    r.fail(n, "source.url needs its sha256", "an archive source is pinned by the sha256 of its bytes");
  }
  if (auto v = n["ref"]) {
    s.ref = text(r, v, "source.ref").value;
    if (s.git.empty()) r.fail(v, "source.ref goes with source.git");
    if (s.ref.empty()) r.fail(v, "source.ref is empty");
  } else if (!s.git.empty()) {
    r.fail(n, "source.git needs a ref (a commit, or a tag)");
  }
  return s;
}

LayerSpec parse_layer(const Reader& r, const YAML::Node& n, const fs::path& base) {
  r.check_keys(n, "a layer",
               {"name", "copy", "owner", "preserve_modes", "comment", "use", "version", "components", "packages",
                "from", "build", "keep_source", "patches", "apt", "pip", "replace", "duplicates", "repositories", "pins",
                "recommends", "base", "priority", "source", "configure", "below", "compression"},
               {"name"});
  LayerSpec l;
  l.where = r.at(n);
  l.key_where = key_places(r, n);
  l.name = word(r, n["name"], "layer name");
  if (auto v = n["copy"]) {
    r.expect_list(v, "'copy'");
    for (const auto& item : v) l.copy.push_back(parse_copy(r, item, base));
    if (l.copy.empty()) r.fail(v, "'copy' is an empty list");
  }
  if (auto v = n["owner"]) parse_owner(r, v, l);
  if (auto v = n["preserve_modes"]) l.preserve_modes = r.boolean(v, "'preserve_modes'");
  if (auto v = n["comment"]) l.comment = r.string(v, "'comment'");
  if (auto v = n["use"]) {
    l.use = r.string_or_strings(v, "'use'");
    if (l.use.empty()) r.fail(v, "'use' is an empty list");
    for (const auto& u : l.use)
      if (u.empty() || u.find_first_of(" \t${}") != std::string::npos)
        r.fail(v, "'use' names catalog components, not '" + u + "'", "e.g. use: cuda, or use: [cudnn, nccl]");
  }
  if (auto v = n["version"]) l.version = text(r, v, "'version'");
  if (auto v = n["components"]) l.components = r.strings(v, "'components'");
  if (auto v = n["packages"]) l.packages = r.strings(v, "'packages'");
  if (auto v = n["from"]) {
    l.from = r.string(v, "'from'");
    const std::vector<std::string> kinds = {"redist", "wheel", "apt", "source"};
    if (std::find(kinds.begin(), kinds.end(), l.from) == kinds.end()) {
      std::string best = suggest(l.from, kinds);
      r.fail(v, "'from' is redist, wheel, apt or source, not '" + l.from + "'" +
                    (best.empty() ? "" : " (did you mean '" + best + "'?)"));
    }
  }
  if (auto v = n["build"]) l.build = parse_build(r, v);
  if (auto v = n["keep_source"]) {  // may use ${vars}: checked again once expanded (resolve::instantiate)
    l.keep_source = text(r, v, "'keep_source'").value;
    if (l.keep_source.empty() || l.keep_source[0] != '/')
      r.fail(v, "'keep_source' must be an absolute path in the image, not '" + l.keep_source + "'");
    if (("/" + l.keep_source + "/").find("/../") != std::string::npos ||
        l.keep_source.find_first_not_of('/') == std::string::npos)
      r.fail(v, "'keep_source' must be a directory below the image root, without '..', not '" +
                    l.keep_source + "'");
  }
  if (auto v = n["patches"]) {
    r.expect_list(v, "'patches'");
    for (const auto& p : v) {
      std::string path = r.string(p, "a patch path");
      if (path.empty()) r.fail(p, "a patch path is empty");
      l.patches.push_back({path, fs::path(path).is_absolute() ? fs::path(path) : base / path, r.at(p)});
    }
  }
  if (auto v = n["source"]) l.source = parse_source(r, v, base);
  if (auto v = n["configure"]) l.configure = r.boolean(v, "'configure'");
  if (auto v = n["apt"]) l.apt = r.string_or_strings(v, "'apt'");
  if (auto v = n["pip"]) l.pip = r.string_or_strings(v, "'pip'");
  if (auto v = n["duplicates"]) {
    l.duplicates = r.string(v, "'duplicates'");
    if (l.duplicates != "report" && l.duplicates != "lower" && l.duplicates != "upper" && l.duplicates != "error")
      r.fail(v, "'duplicates' is report, lower, upper or error, not '" + l.duplicates + "'",
             "which copy wins when the layer holds a library a lower layer has too: lower links this layer's "
             "copy to the lower one (see docs/layers.md)");
  }
  if (auto v = n["compression"]) {
    l.compression = r.string(v, "'compression'");
    if (l.compression != "gzip" && l.compression != "zstd" && l.compression != "estargz" &&
        l.compression != "zstd:chunked" && l.compression != "none")
      r.fail(v, "'compression' is gzip, zstd, estargz, zstd:chunked or none, not '" + l.compression + "'",
             "this layer's compression, over the build's --compression (see docs/layers.md)");
  }
  if (auto v = n["repositories"]) l.repositories = parse_apt_repositories(r, v, base);  // recipe_apt.cpp
  if (auto v = n["pins"]) l.pins = parse_apt_pins(r, v);
  if (auto v = n["recommends"]) l.recommends = r.boolean(v, "'recommends'");
  if (auto v = n["base"]) l.base = r.boolean(v, "'base'");
  if (auto v = n["priority"]) l.priority = parse_apt_priority(r, v);
  if (auto v = n["replace"]) r.boolean(v, "'replace'");  // kept in key_where; see merge_recipe
  if (auto v = n["below"]) l.below = word(r, v, "'below'");  // placed by merge_recipe
  return l;
}

ConfigSpec parse_config(const Reader& r, const YAML::Node& n) {
  r.check_keys(n, "'config'", {"env", "entrypoint", "cmd", "workdir", "user", "labels", "ports", "stop_signal"});
  ConfigSpec c;
  if (auto v = n["env"]) c.env = env_list(r, v, "config.env");
  if (auto v = n["entrypoint"]) c.entrypoint = r.string_or_strings(v, "config.entrypoint");
  if (auto v = n["cmd"]) c.cmd = r.string_or_strings(v, "config.cmd");
  if (auto v = n["workdir"]) c.workdir = r.string(v, "config.workdir");
  if (auto v = n["user"]) c.user = r.string(v, "config.user");
  if (auto v = n["labels"]) c.labels = r.string_map(v, "config.labels");
  if (auto v = n["ports"]) c.ports = r.string_or_strings(v, "config.ports");
  if (auto v = n["stop_signal"]) c.stop_signal = r.string(v, "config.stop_signal");
  return c;
}

MatrixValue matrix_value(const Reader& r, const YAML::Node& n, const std::string& key) {
  MatrixValue v;
  v.where = r.at(n);
  if (key == "arch") {
    if (!n.IsSequence())
      r.fail(n, "a value of matrix.arch is a list of compute capabilities, got " + std::string(yaml::describe(n)),
             "write arch: [[\"8.0\", \"9.0\"]] for one point building for 8.0 and 9.0");
    v.is_list = true;
    for (const auto& cc : n) {
      std::string s = r.string(cc, "a compute capability");
      if (!is_compute_capability(s)) r.fail(cc, "bad compute capability '" + s + "'", "write 8.0, 9.0a or 8.6+PTX");
      v.items.push_back(s);
    }
    if (v.items.empty()) r.fail(n, "an arch list is empty");
  } else {
    std::string s = r.string(n, "a value of matrix." + key);
    if (s.find("${") != std::string::npos) r.fail(n, "matrix values cannot use variables");
    if (key == "platform" && platform_architecture(s).empty())
      r.fail(n, "matrix.platform '" + s + "' is not a platform stackbuild builds for",
             "write linux/amd64 or linux/arm64");
    v.items.push_back(s);
  }
  return v;
}

MatrixCombo matrix_combo(const Reader& r, const YAML::Node& n, const char* what) {
  r.expect_map(n, std::string("an ") + what + " entry");
  MatrixCombo c;
  c.where = r.at(n);
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = r.string(it->first, "a matrix key");
    for (const auto& [k, v] : c.values)
      if (k == key) r.fail(it->first, "duplicate key '" + key + "' in an " + what + " entry");
    c.values.emplace_back(key, matrix_value(r, it->second, key));
    c.values.back().second.where = r.at(it->first);
  }
  if (c.values.empty()) r.fail(n, std::string("an empty ") + what + " entry");
  return c;
}

Matrix parse_matrix(const Reader& r, const YAML::Node& n) {
  r.expect_map(n, "'matrix'");
  Matrix m;
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = r.string(it->first, "a matrix key");
    if (key == "include" || key == "exclude") {
      r.expect_list(it->second, "matrix." + key);
      const YAML::Node list = it->second;  // a copy: `it->second` dies with the iterator's proxy
      for (const auto& e : list)
        (key == "include" ? m.include : m.exclude).push_back(matrix_combo(r, e, key.c_str()));
      continue;
    }
    for (char c : key)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
        r.fail(it->first, "bad matrix key '" + key + "'", "keys are names usable as ${key}: cuda, pytorch, arch");
    if (m.find(key)) r.fail(it->first, "duplicate key '" + key + "' in 'matrix'");
    MatrixAxis axis{key, {}, r.at(it->first)};
    if (key == "arch" && it->second.IsSequence() && it->second.size() > 0 && it->second[0].IsScalar())
      r.fail(it->second, "matrix.arch is a list of arch lists", "write arch: [[\"8.0\", \"9.0\"]], not arch: [\"8.0\", \"9.0\"]");
    r.expect_list(it->second, "matrix." + key);
    const YAML::Node list = it->second;  // a copy: `it->second` dies with the iterator's proxy
    for (const auto& v : list) {
      MatrixValue mv = matrix_value(r, v, key);
      for (const auto& seen : axis.values)
        if (seen == mv) r.fail(v, "matrix." + key + " lists '" + mv.str() + "' twice");
      axis.values.push_back(std::move(mv));
    }
    if (axis.values.empty()) r.fail(it->second, "matrix." + key + " is an empty list");
    m.axes.push_back(std::move(axis));
  }
  return m;
}

TestSpec parse_test(const Reader& r, const YAML::Node& n) {
  r.check_keys(n, "a test", {"name", "run", "gpu", "expect", "exit", "timeout"}, {"name", "run"});
  TestSpec t;
  t.where = r.at(n);
  t.name = word(r, n["name"], "test name");
  t.run = text(r, n["run"], "'run'");
  if (auto v = n["gpu"]) t.gpu = r.boolean(v, "'gpu'");
  if (auto v = n["expect"]) t.expect = text(r, v, "'expect'");
  if (auto v = n["exit"]) {
    int64_t e = r.integer(v, "'exit'");
    if (e < 0 || e > 255) r.fail(v, "a test's 'exit' is an exit status from 0 to 255, not " + std::to_string(e));
    t.exit = static_cast<int>(e);
  }
  if (auto v = n["timeout"]) t.timeout = duration(r, v, "a test's 'timeout'");
  return t;
}

// `builtin_tests: true|false` or `{cuda: false, pytorch: true, ...}`.
BuiltinTestsSpec parse_builtin_tests(const Reader& r, const YAML::Node& n) {
  BuiltinTestsSpec b;
  if (n.IsScalar()) {
    b.enabled = r.boolean(n, "'builtin_tests'");
    return b;
  }
  r.expect_map(n, "'builtin_tests' (true, false, or a map such as {cuda: false})");
  std::vector<std::string> known = builtin_test_components();
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = r.string(it->first, "a builtin_tests key");
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string all;
      for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
      r.fail(it->first, "no built-in test for '" + key + "'", "built-in tests exist for " + all);
    }
    b.components[key] = r.boolean(it->second, "builtin_tests." + key);
    b.where[key] = r.at(it->first);
  }
  return b;
}

// `static_checks: {arch_ignore: [GLOB...], libraries_ignore: [GLOB...]}`.
StaticChecksSpec parse_static_checks(const Reader& r, const YAML::Node& n) {
  r.expect_map(n, "'static_checks' (a map such as {arch_ignore: [GLOB, ...]})");
  r.check_keys(n, "'static_checks'", {"arch_ignore", "libraries_ignore"});
  StaticChecksSpec out;
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = r.string(it->first, "a static_checks key");
    std::string what = "static_checks." + key;
    r.expect_list(it->second, "'" + what + "' (a list of globs of image paths)");
    auto& globs = key == "arch_ignore" ? out.arch_ignore : out.libraries_ignore;
    out.where[key] = r.at(it->first);
    const YAML::Node list = it->second;  // a copy: `it->second` dies with the iterator's proxy
    for (const auto& g : list) {
      std::string glob = r.string(g, "a glob of " + what);
      std::string why = glob_error(glob);
      if (why.empty() && glob[0] != '/' && !glob.starts_with("**/"))
        why = "a relative path: the check matches absolute image paths";
      if (!why.empty())
        r.fail(g, what + ": '" + glob + "' is not a glob of image paths: " + why,
               "write an absolute path in the image, e.g. /usr/lib/x86_64-linux-gnu/libfoo.so.*, or **/libfoo.so.*");
      globs.push_back(glob);
    }
  }
  return out;
}

}  // namespace

bool is_compute_capability(const std::string& s0) {
  std::string s = s0;
  if (s.ends_with("+PTX")) s.resize(s.size() - 4);
  size_t dot = s.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 >= s.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (i == dot) continue;
    bool suffix = i + 1 == s.size() && i > dot + 1 && (c == 'a' || c == 'f');
    if (!std::isdigit(static_cast<unsigned char>(c)) && !suffix) return false;
  }
  return true;
}

// `cluster:` each point's resources on a scheduler. The values go into a job
// script's #SBATCH lines, so each is checked against what Slurm takes: a
// value of other characters (a space, a newline, a quote) is refused here.
namespace {
ClusterSpec parse_cluster(const yaml::Reader& r, const YAML::Node& n) {
  r.check_keys(n, "'cluster'", {"cpus", "memory", "time", "partition", "gpus"});
  ClusterSpec c;
  c.where = r.at(n);
  auto only = [&](const YAML::Node& v, const char* key, const std::string& s, const char* allowed, const char* example) {
    if (s.empty() || s.find_first_not_of(allowed) != std::string::npos)
      r.fail(v, std::string("cluster.") + key + " '" + s + "' is not a value Slurm takes", std::string("e.g. ") + example);
  };
  if (auto v = n["cpus"]) {
    c.cpus = r.integer(v, "cluster.cpus");
    if (*c.cpus < 1 || *c.cpus > 100000) r.fail(v, "cluster.cpus must be at least 1");
  }
  if (auto v = n["gpus"]) {
    c.gpus = r.integer(v, "cluster.gpus");
    if (*c.gpus < 0 || *c.gpus > 1024) r.fail(v, "cluster.gpus must be 0 or more");
  }
  if (auto v = n["memory"]) {
    c.memory = r.string(v, "cluster.memory");
    only(v, "memory", c.memory, "0123456789KMGTkmgt", "32G or 4000M");
    if (!std::isdigit(static_cast<unsigned char>(c.memory[0])))
      r.fail(v, "cluster.memory '" + c.memory + "' is not a value Slurm takes", "e.g. 32G or 4000M");
  }
  if (auto v = n["time"]) {
    c.time = r.string(v, "cluster.time");
    only(v, "time", c.time, "0123456789:-", "4:00:00, 1-12:00:00 or 90 (minutes)");
  }
  if (auto v = n["partition"]) {
    c.partition = r.string(v, "cluster.partition");
    only(v, "partition", c.partition, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,-", "gpu");
  }
  return c;
}
}  // namespace

RecipeFile parse_recipe_file(const std::string& text_, const fs::path& file) {
  Reader r(file.string());
  YAML::Node root = r.parse(text_);
  if (!root.IsMap()) throw InputError(SourceLocation{file.string(), 1, 1}, "a recipe must be a YAML mapping");
  r.check_keys(root, "the recipe",
               {"stack", "extends", "from", "release", "architecture", "source_date_epoch", "layer_budget", "matrix",
                "layers", "config", "annotations", "tags", "push", "tests", "builtin_tests", "platform", "repositories",
                "pins", "static_checks", "pip_constraint", "cluster"});
  RecipeFile out;
  Recipe& rec = out.recipe;
  rec.file = file;
  rec.key_where = key_places(r, root);
  const fs::path base = file.parent_path();
  if (auto n = root["extends"]) {
    out.extends = r.string(n, "'extends'");
    out.extends_where = r.at(n);
    if (out.extends.empty()) r.fail(n, "'extends' is empty");
  }
  if (auto n = root["stack"]) {
    rec.stack = r.string(n, "'stack'");
    if (rec.stack.empty()) r.fail(n, "stack must not be empty");
  }
  if (auto n = root["from"]) {  // the base image (pipeline/base_image.cpp checks the reference)
    rec.from = text(r, n, "'from'");
    rec.from_dir = base;
    if (rec.from.value.empty() || rec.from.value.find_first_of(" \t") != std::string::npos)
      r.fail(n, "from: '" + rec.from.value + "' is not an image reference",
             "write REGISTRY/REPO:TAG, REGISTRY/REPO@sha256:..., or oci:PATH[:TAG] for a local OCI layout");
  }
  if (auto n = root["release"]) rec.release = r.string(n, "'release'");
  if (auto n = root["architecture"]) {
    rec.architecture = r.string(n, "'architecture'");
    if (platform_architecture("linux/" + rec.architecture).empty())
      r.fail(n, "architecture '" + rec.architecture + "' is not one stackbuild builds for", "write amd64 or arm64");
  }
  if (auto n = root["source_date_epoch"]) {
    int64_t e = r.integer(n, "'source_date_epoch'");
    if (e < 0) r.fail(n, "source_date_epoch must not be negative");
    rec.source_date_epoch = e;
  }
  if (auto n = root["platform"]) {  // what the image is, where no os layer says it
    r.check_keys(n, "'platform'", {"python", "glibc"});
    for (const char* k : {"python", "glibc"})
      if (auto v = n[k]) {
        std::string s = r.string(v, std::string("platform.") + k);
        if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0])) ||
            s.find_first_not_of("0123456789.") != std::string::npos || s.back() == '.' || s.find('.') == std::string::npos)
          r.fail(v, std::string("platform.") + k + " is a version such as " + (k[0] == 'p' ? "3.12" : "2.39") +
                        ", not '" + s + "'");
        (k[0] == 'p' ? rec.platform.python : rec.platform.glibc) = s;
      }
    rec.platform.where = r.at(n);
  }
  if (auto n = root["layer_budget"]) {
    auto b = parse_bytes(r.string(n, "'layer_budget'"));
    if (!b) r.fail(n, "layer_budget wants a size such as 8GiB, 500MiB or 1000000 (bytes)");
    rec.layer_budget = *b;
  }
  if (auto n = root["pip_constraint"]) rec.pip_constraint = r.boolean(n, "'pip_constraint'");
  if (auto n = root["matrix"]) rec.matrix = parse_matrix(r, n);
  if (auto n = root["layers"]) {
    r.expect_list(n, "'layers'");
    for (const auto& item : n) {
      LayerSpec l = parse_layer(r, item, base);
      for (const auto& other : rec.layers)
        if (other.name == l.name)
          r.fail(item["name"], "layer name '" + l.name + "' is used twice", "first at " + other.where.str());
      rec.layers.push_back(std::move(l));
    }
    if (rec.layers.empty()) r.fail(n, "the recipe has no layers");
  }
  if (auto n = root["config"]) rec.config = parse_config(r, n);
  if (auto n = root["repositories"]) rec.repositories = parse_apt_repositories(r, n, base);
  if (auto n = root["pins"]) rec.pins = parse_apt_pins(r, n);
  if (auto n = root["annotations"]) {
    r.check_keys(n, "'annotations'", {"title", "version", "source", "revision", "description"});
    rec.annotations = r.string_map(n, "'annotations'");
  }
  if (auto n = root["tags"]) {
    rec.tags_where = r.at(n);
    if (n.IsScalar()) {
      rec.tags.push_back(text(r, n, "'tags'").value);
      rec.tag_where.push_back(r.at(n));
    } else {
      r.expect_list(n, "'tags'");
      for (const auto& t : n) {
        rec.tags.push_back(text(r, t, "a tag").value);
        rec.tag_where.push_back(r.at(t));
      }
    }
  }
  if (auto n = root["push"]) {
    if (n.IsScalar())
      rec.push.push_back(text(r, n, "'push'"));
    else {
      r.expect_list(n, "'push'");
      for (const auto& p : n) rec.push.push_back(text(r, p, "a push target"));
    }
    for (const auto& p : rec.push)
      if (p.value.empty() || p.value.find_first_of(" \t") != std::string::npos)
        throw InputError(p.where, "push target '" + p.value + "' is not an image reference",
                         "write registry.example.com/team/name:tag");
  }
  if (auto n = root["tests"]) {
    r.expect_list(n, "'tests'");
    for (const auto& item : n) {
      TestSpec t = parse_test(r, item);
      for (const auto& other : rec.tests)
        if (other.name == t.name)
          r.fail(item["name"], "test name '" + t.name + "' is used twice", "first at " + other.where.str());
      rec.tests.push_back(std::move(t));
    }
  }
  if (auto n = root["builtin_tests"]) rec.builtin_tests = parse_builtin_tests(r, n);
  if (auto n = root["static_checks"]) rec.static_checks = parse_static_checks(r, n);
  if (auto n = root["cluster"]) rec.cluster = parse_cluster(r, n);
  return out;
}

}  // namespace sb::detail
