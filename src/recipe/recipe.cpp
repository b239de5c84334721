// load_recipe(): read the file and its `extends:` parents, merge them
// (nearest wins), validate what only the whole recipe can show.
#include "recipe/recipe.hpp"

#include <algorithm>
#include <string_view>

#include "recipe/parse.hpp"
#include "util/file.hpp"

namespace sb {

bool is_os_component(const std::string& name) { return name == "os" || name == "debian" || name == "ubuntu"; }

namespace detail {

namespace {

template <class T, class Key>
T* by_name(std::vector<T>& v, const Key& name) {
  for (auto& x : v)
    if (x.name == name) return &x;
  return nullptr;
}

// The keys `child` gave, over `base`.
void merge_layer(LayerSpec& base, const LayerSpec& child) {
  auto replace = child.key_where.find("replace");
  if (replace != child.key_where.end()) {  // `replace: true`: the child's layer alone
    base = child;
    return;
  }
  for (const auto& [key, where] : child.key_where) {
    if (key == "copy") base.copy = child.copy;
    else if (key == "owner") base.uid = child.uid, base.gid = child.gid;
    else if (key == "preserve_modes") base.preserve_modes = child.preserve_modes;
    else if (key == "comment") base.comment = child.comment;
    else if (key == "use") base.use = child.use;
    else if (key == "version") base.version = child.version;
    else if (key == "components") base.components = child.components;
    else if (key == "packages") base.packages = child.packages;
    else if (key == "from") base.from = child.from;
    else if (key == "build") base.build = child.build;
    else if (key == "keep_source") base.keep_source = child.keep_source;
    else if (key == "patches") base.patches.insert(base.patches.end(), child.patches.begin(), child.patches.end());
    else if (key == "source") base.source = child.source;
    else if (key == "configure") base.configure = child.configure;
    else if (key == "apt") base.apt = child.apt;
    else if (key == "pip") base.pip = child.pip;
    else if (key == "duplicates") base.duplicates = child.duplicates;
    else if (key == "compression") base.compression = child.compression;
    else if (key == "repositories") base.repositories = child.repositories;
    else if (key == "pins") base.pins = child.pins;
    else if (key == "recommends") base.recommends = child.recommends;
    else if (key == "base") base.base = child.base;
    else if (key == "priority") base.priority = child.priority;
    base.key_where[key] = where;
  }
}

template <class V>
void merge_pairs(std::vector<std::pair<std::string, V>>& base, const std::vector<std::pair<std::string, V>>& child) {
  for (const auto& kv : child) {
    auto it = std::find_if(base.begin(), base.end(), [&](const auto& b) { return b.first == kv.first; });
    if (it != base.end()) it->second = kv.second;
    else base.push_back(kv);
  }
}

}  // namespace

void merge_recipe(Recipe& base, const Recipe& child) {
  auto given = [&](const char* key) { return child.key_where.count(key) > 0; };
  if (given("stack")) base.stack = child.stack;
  if (given("from")) base.from = child.from, base.from_dir = child.from_dir;
  if (given("release")) base.release = child.release;
  if (given("architecture")) base.architecture = child.architecture;
  if (given("platform")) base.platform = child.platform;
  if (given("source_date_epoch")) base.source_date_epoch = child.source_date_epoch;
  if (given("layer_budget")) base.layer_budget = child.layer_budget;
  if (given("pip_constraint")) base.pip_constraint = child.pip_constraint;
  if (given("cluster")) base.cluster = child.cluster;
  if (given("matrix")) {
    for (const auto& axis : child.matrix.axes) {
      auto it = std::find_if(base.matrix.axes.begin(), base.matrix.axes.end(),
                             [&](const MatrixAxis& a) { return a.key == axis.key; });
      if (it != base.matrix.axes.end()) *it = axis;
      else base.matrix.axes.push_back(axis);
    }
    if (!child.matrix.include.empty()) base.matrix.include = child.matrix.include;
    if (!child.matrix.exclude.empty()) base.matrix.exclude = child.matrix.exclude;
  }
  for (const auto& l : child.layers) {
    if (LayerSpec* mine = by_name(base.layers, l.name)) {
      if (!l.below.empty())
        throw InputError(l.at("below"), "layer '" + l.name + "': 'below' places a new layer, and the recipes it extends "
                                        "have a layer '" + l.name + "' already",
                         "drop 'below:' (the layer merges into theirs, where it is), or give the layer a new name");
      merge_layer(*mine, l);
    } else if (!l.below.empty()) {  // directly under the named layer
      auto under = std::find_if(base.layers.begin(), base.layers.end(),
                                [&](const LayerSpec& b) { return b.name == l.below; });
      if (under == base.layers.end()) {
        std::vector<std::string> names;
        for (const auto& b : base.layers) names.push_back(b.name);
        std::string s = suggest(l.below, names);
        throw InputError(l.at("below"), "layer '" + l.name + "': no layer '" + l.below + "' to go below in the recipes it extends" +
                                            (s.empty() ? "" : " (did you mean '" + s + "'?)"));
      }
      LayerSpec placed = l;
      placed.below.clear();
      base.layers.insert(under, std::move(placed));
    } else {
      base.layers.push_back(l);
    }
  }
  if (given("config")) {
    const ConfigSpec& c = child.config;
    merge_pairs(base.config.env, c.env);
    if (!c.entrypoint.empty()) base.config.entrypoint = c.entrypoint;
    if (!c.cmd.empty()) base.config.cmd = c.cmd;
    if (!c.workdir.empty()) base.config.workdir = c.workdir;
    if (!c.user.empty()) base.config.user = c.user;
    if (!c.stop_signal.empty()) base.config.stop_signal = c.stop_signal;
    if (!c.ports.empty()) base.config.ports = c.ports;
    for (const auto& [k, v] : c.labels) base.config.labels[k] = v;
  }
  for (const auto& [k, v] : child.annotations) base.annotations[k] = v;
  if (given("tags")) {
    base.tags = child.tags;
    base.tag_where = child.tag_where;
    base.tags_where = child.tags_where;
  }
  if (given("push")) base.push = child.push;
  if (given("repositories")) base.repositories = child.repositories;
  if (given("pins")) base.pins = child.pins;
  for (const auto& t : child.tests) {
    if (TestSpec* mine = by_name(base.tests, t.name)) *mine = t;
    else base.tests.push_back(t);
  }
  if (given("builtin_tests")) {
    base.builtin_tests.enabled = child.builtin_tests.enabled;
    for (const auto& [k, v] : child.builtin_tests.components) base.builtin_tests.components[k] = v;
    for (const auto& [k, w] : child.builtin_tests.where) base.builtin_tests.where[k] = w;
  }
  if (given("static_checks")) {  // by key: a child's list replaces its parent's
    const StaticChecksSpec& c = child.static_checks;
    for (const auto& [key, list] : {std::pair{"arch_ignore", &StaticChecksSpec::arch_ignore},
                                    std::pair{"libraries_ignore", &StaticChecksSpec::libraries_ignore}}) {
      auto w = c.where.find(key);
      if (w == c.where.end()) continue;
      base.static_checks.*list = c.*list;
      base.static_checks.where[key] = w->second;
    }
  }
  for (const auto& [k, w] : child.key_where) base.key_where[k] = w;
  base.file = child.file;
}

namespace {

// Each layer is made by one installer: copying files, apt, pip, NVIDIA's
// redist archives, or build steps. Two in one layer would leave one unheard.
void check_layer_kind(const LayerSpec& l) {
  const bool os_use = std::any_of(l.use.begin(), l.use.end(), is_os_component);
  const bool other_use = std::any_of(l.use.begin(), l.use.end(), [](const auto& u) { return !is_os_component(u); });
  if (os_use && other_use)
    throw InputError(l.at("use"), "layer '" + l.name + "': 'use' names the OS and other components in one layer",
                     "the OS is a layer of its own: put the other components in layers above it");
  struct Kind {
    const char* what;
    bool is;
    const char* key;
  };
  auto key_of = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (l.key_where.count(k)) return k;
    return *keys.begin();
  };
  // A `use:` component built from its source (`from: source`, or the layer's own `source:`) is build steps' work.
  const bool from_packages = (l.from.empty() || l.from == "redist") && !l.from_source();
  const Kind kinds[] = {
      {"installs Debian packages", !l.apt.empty() || os_use || l.from == "apt", key_of({"apt", "use", "from"})},
      {"installs Python wheels", !l.pip.empty() || l.from == "wheel", key_of({"pip", "from"})},
      {"installs NVIDIA's redist archives of its 'use:' components", other_use && from_packages, "use"},
      {"runs build steps", !l.build.empty(), "build"},
  };
  const Kind* first = nullptr;
  for (const auto& k : kinds) {
    if (!k.is) continue;
    if (!first) {
      first = &k;
      continue;
    }
    throw InputError(l.at(k.key), "layer '" + l.name + "' " + first->what + " and " + k.what,
                     !l.build.empty() && &k == &kinds[3]
                         ? "put the packages in a layer of their own below it (the steps see every layer below); "
                           "'use:' with build steps needs 'from: source'"
                         : "each layer is made by one installer: split it in two");
  }
}

}  // namespace

void validate_recipe(const Recipe& r) {
  SourceLocation top{r.file.string(), 1, 1};
  if (r.stack.empty()) throw InputError(top, "missing key 'stack' in the recipe");
  if (r.layers.empty()) {
    auto it = r.key_where.find("layers");
    throw InputError(it == r.key_where.end() ? top : it->second,
                     it == r.key_where.end() ? "missing key 'layers' in the recipe" : "the recipe has no layers");
  }
  for (const auto& l : r.layers) {
    auto fail = [&](const std::string& key, const std::string& msg, const std::string& hint = {}) {
      throw InputError(l.at(key), "layer '" + l.name + "': " + msg, hint);
    };
    if (!l.below.empty())  // merge_recipe places (and clears) those of a recipe that extends another
      fail("below", "'below' places a layer under one of the recipe it extends, and this recipe extends none",
           "list the layers in order instead: each goes on top of those before it");
    if (l.copy.empty() && l.use.empty() && l.apt.empty() && l.pip.empty() && l.build.empty() &&
        !l.source.given())
      fail("name", "has nothing in it", "give it 'copy:', 'use:', 'apt:', 'pip:' or 'build:'");
    if (l.copies())
      for (const char* k : {"use", "apt", "pip", "build", "source", "configure"})
        if (l.key_where.count(k))
          fail(k, std::string("copies files and has '") + k + "'",
               "a layer either copies files or installs software: split it in two");
    if (l.needs() == "build" && l.build.run.empty())
      fail("build", "has build steps without 'run:' commands", "give 'build:' a 'run:' list, or drop it");
    const bool own_source = l.source.given();  // from/keep_source/patches then need no `use:`
    if (l.use.empty())
      for (const char* k : {"version", "components", "packages", "from", "keep_source", "patches"})
        if (l.key_where.count(k) && !(own_source && (std::string_view(k) == "from" ||
                                                     std::string_view(k) == "keep_source" ||
                                                     std::string_view(k) == "patches")))
          fail(k, std::string("'") + k + "' needs 'use:' (the catalog component it applies to)");
    if (l.use.size() > 1)
      for (const char* k : {"version", "from", "keep_source", "patches", "components"})
        if (l.key_where.count(k) && (k != std::string("from") || l.from == "source"))
          fail(k, std::string("'") + k + "' applies to one component, and the layer uses " +
                      std::to_string(l.use.size()),
               "use one layer per component, or let the resolver choose the versions");
    for (const auto& p : l.patches) {
      std::error_code ec;
      if (!fs::is_regular_file(p.file, ec))
        throw InputError(p.where, "layer '" + l.name + "': patch '" + p.path + "' not found (looked for " +
                                      p.file.string() + ")",
                         "patch paths are relative to the recipe that names them");
    }
    if (!l.keep_source.empty() && !l.from_source() && !l.keeps_source_beside())
      fail("keep_source", "keep_source needs 'from: source' (the catalog component's source) or 'source:'",
           "a layer with build steps keeps the tree they compile; without steps, 'use:' a component "
           "to keep its source beside its packages");
    if (!l.patches.empty() && !l.from_source() && !l.keeps_source_beside())
      fail("patches", "patches needs 'from: source' (the catalog component's source), 'source:' or 'keep_source:'",
           "patches apply to a source tree that is built or kept");
    if (!l.source.path.empty()) {
      fs::path dir = fs::path(l.source.path).is_absolute() ? fs::path(l.source.path) : l.source.base / l.source.path;
      std::error_code ec;
      if (!fs::is_directory(dir, ec))
        throw InputError(l.source.where, "layer '" + l.name + "': source.path '" + l.source.path +
                                             "' is not a directory (looked for " + dir.string() + ")",
                         "source paths are relative to the recipe that names them");
    }
    if (l.source.given() && l.from == "wheel" && !l.keeps_source_beside())
      fail("source", "has 'source:' and 'from: wheel'",
           "a layer is built from its source or installed from wheels; with 'keep_source:', "
           "'source:' is the tree kept beside the wheels");
    if (l.source.given() && !l.keeps_source_beside() && (!l.apt.empty() || !l.pip.empty()))
      fail(l.apt.empty() ? "pip" : "apt", "builds from 'source:' and installs packages",
           "put the packages in a layer of their own below it");
    if (l.from_source() && l.source.given() && l.build.run.empty())  // `from: source` alone: checked when built
      fail("source", "is built from source and has no 'build:' steps",
           "give it 'build: {run: [...]}': the commands that compile the tree");
    if (!l.copies()) check_layer_kind(l);  // after the checks above, which say more
    if (l.configure && ((l.apt.empty() && l.use.empty()) || !l.build.empty() || !l.pip.empty() || l.from_source()))
      fail("configure", "'configure' runs dpkg --configure -a after an apt layer's packages",
           "put it on a layer with 'apt:' or an OS layer ('use: debian' or 'ubuntu')");
  }
  validate_apt_keys(r);
  std::vector<std::string> keys;
  for (const auto& a : r.matrix.axes) keys.push_back(a.key);
  for (const auto* list : {&r.matrix.include, &r.matrix.exclude}) {
    const bool is_include = list == &r.matrix.include;
    for (const auto& combo : *list) {
      for (const auto& [k, v] : combo.values) {
        const MatrixAxis* axis = r.matrix.find(k);
        if (!axis && !is_include) {
          std::string best = suggest(k, keys);
          throw InputError(v.where, "exclude names '" + k + "', which is not a matrix key" +
                                        (best.empty() ? "" : " (did you mean '" + best + "'?)"));
        }
        if (!axis && is_include) {
          std::string best = suggest(k, keys);
          if (!best.empty())
            throw InputError(v.where, "include names '" + k + "', which is not a matrix key (did you mean '" +
                                          best + "'?)");
          continue;  // an include may bring a key of its own
        }
        if (!is_include && std::find(axis->values.begin(), axis->values.end(), v) == axis->values.end())
          throw InputError(v.where, "exclude value " + k + "='" + v.str() + "' is not in matrix." + k,
                           "an exclude that matches nothing is likely a typo");
      }
    }
  }
}

}  // namespace detail

const std::vector<std::string>& builtin_test_components() {
  static const std::vector<std::string> names{"cuda", "cublas", "cudnn", "nccl", "pytorch", "jax", "tensorflow"};
  return names;
}

Recipe parse_recipe(const std::string& text, const fs::path& file) {
  // The chain child -> parent -> ..., read until a file has no `extends:`.
  std::vector<detail::RecipeFile> chain;
  chain.push_back(detail::parse_recipe_file(text, file));
  std::vector<fs::path> seen{fs::weakly_canonical(file)};
  while (!chain.back().extends.empty()) {
    const auto& child = chain.back();
    fs::path parent = fs::path(child.extends).is_absolute() ? fs::path(child.extends)
                                                             : (child.recipe.file.parent_path() / child.extends).lexically_normal();
    fs::path canon = fs::weakly_canonical(parent);
    if (auto it = std::find(seen.begin(), seen.end(), canon); it != seen.end()) {
      std::string names;
      for (const auto& f : chain) names += f.recipe.file.filename().string() + " -> ";
      throw InputError(child.extends_where, "extends cycle: " + names + parent.filename().string(),
                       "a recipe cannot extend itself through its parents");
    }
    seen.push_back(canon);
    std::string parent_text;
    try {
      parent_text = read_file(parent);
    } catch (Error& e) {
      throw InputError(child.extends_where, "cannot read the parent recipe '" + child.extends + "': " + e.what());
    }
    try {
      chain.push_back(detail::parse_recipe_file(parent_text, parent));
    } catch (Error& e) {
      e.add_trace("while reading '" + child.extends + "', extended at " + child.extends_where.str());
      throw;
    }
  }
  Recipe r = chain.back().recipe;  // the farthest parent, then each child over it
  for (size_t i = chain.size() - 1; i-- > 0;) detail::merge_recipe(r, chain[i].recipe);
  for (size_t i = 1; i < chain.size(); ++i) r.extends_chain.push_back(chain[i].recipe.file);
  r.file = file;
  detail::validate_recipe(r);
  if (r.tags.empty()) {
    r.tags.push_back(r.stack + ":latest");
    r.tag_where.push_back({});
  }
  return r;
}

Recipe load_recipe(const fs::path& file) {
  std::string text;
  try {
    text = read_file(file);
  } catch (Error& e) {
    throw Error(e.what(), ErrorKind::Input);
  }
  return parse_recipe(text, file);
}

std::string platform_architecture(const std::string& platform) {
  for (const char* p : kPlatforms)
    if (platform == p) return platform.substr(platform.find('/') + 1);
  return "";
}

}  // namespace sb
