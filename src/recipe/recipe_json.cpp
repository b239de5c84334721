// The Recipe's small helpers and its JSON form.
//
// A copy-only layer's JSON is part of its cache key (pipeline/build.cpp), so
// it has exactly the fields it had before the component keys existed; the new
// keys appear only when set.
#include <nlohmann/json.hpp>

#include "recipe/recipe.hpp"

namespace sb {

SourceLocation LayerSpec::at(const std::string& key) const {
  auto it = key_where.find(key);
  return it == key_where.end() ? where : it->second;
}

std::string LayerSpec::needs() const {
  if (!use.empty()) return "use";
  if (!apt.empty()) return "apt";
  if (!pip.empty()) return "pip";
  if (!build.empty()) return "build";
  return "";
}

std::vector<std::vector<std::string>> BuildSpec::commands() const {
  std::vector<std::vector<std::string>> out;
  size_t next = 0;
  auto shell = [&](const Text& t) { out.push_back({"/bin/sh", "-c", t.value}); };
  for (const auto& s : shape) {
    if (!s.argv) {
      if (next < run.size()) shell(run[next++]);
      continue;
    }
    std::vector<std::string> argv;
    for (size_t i = 0; i < s.words && next < run.size(); ++i) argv.push_back(run[next++].value);
    out.push_back(std::move(argv));
  }
  while (next < run.size()) shell(run[next++]);  // words no shape covers: shell lines
  return out;
}

bool Recipe::needs_components() const {
  for (const auto& l : layers)
    if (!l.needs().empty()) return true;
  return false;
}

std::string MatrixValue::str() const {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ";") + i;
  return s;
}

const MatrixAxis* Matrix::find(const std::string& key) const {
  for (const auto& a : axes)
    if (a.key == key) return &a;
  return nullptr;
}

void to_json(nlohmann::json& j, const MatrixValue& v) {
  if (v.is_list) j = v.items;
  else j = v.items.empty() ? std::string() : v.items.front();
}

static nlohmann::json env_json(const std::vector<std::pair<std::string, Text>>& env) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [k, v] : env) out.push_back(k + "=" + v.value);
  return out;
}

void to_json(nlohmann::json& j, const AptRepositorySpec& r) {
  if (r.is_default) {
    j = "default";
    if (!r.components.empty()) j = {{"default", true}, {"components", r.components}};
    return;
  }
  j = {{"url", r.url}, {"components", r.components}};
  if (!r.suites.empty()) j["suites"] = r.suites;
  if (!r.keyring.empty()) j["keyring"] = r.keyring;
  if (r.trusted) j["trusted"] = true;
  if (!r.check_valid_until) j["check_valid_until"] = false;
  if (r.priority) j["priority"] = *r.priority;
}

void to_json(nlohmann::json& j, const AptPin& p) { j = {{"origin", p.origin}, {"priority", p.priority}}; }

void to_json(nlohmann::json& j, const LayerSpec& l) {
  nlohmann::json copies = nlohmann::json::array();
  for (const auto& c : l.copy) {
    nlohmann::json cj{{"src", c.src}, {"dst", c.dst}};
    if (c.mode) cj["mode"] = *c.mode;
    copies.push_back(cj);
  }
  j = nlohmann::json{{"name", l.name}, {"copy", copies}, {"preserve_modes", l.preserve_modes}};
  if (l.uid) j["uid"] = *l.uid;
  if (l.gid) j["gid"] = *l.gid;
  if (!l.comment.empty()) j["comment"] = l.comment;
  if (!l.use.empty()) j["use"] = l.use;
  if (!l.version.value.empty()) j["version"] = l.version.value;
  if (!l.components.empty()) j["components"] = l.components;
  if (!l.packages.empty()) j["packages"] = l.packages;
  if (!l.from.empty()) j["from"] = l.from;
  if (!l.keep_source.empty()) j["keep_source"] = l.keep_source;
  if (!l.patches.empty()) {
    nlohmann::json p = nlohmann::json::array();
    for (const auto& patch : l.patches) p.push_back(patch.path);
    j["patches"] = p;
  }
  if (l.source.given()) {
    const SourceDecl& d = l.source;
    nlohmann::json s = nlohmann::json::object();
    const std::pair<const char*, const std::string*> fields[] = {
        {"path", &d.path}, {"url", &d.url}, {"sha256", &d.sha256}, {"git", &d.git}, {"ref", &d.ref},
        {"debian", &d.debian}, {"version", &d.version}, {"suite", &d.suite}};
    for (const auto& [k, v] : fields)
      if (!v->empty()) s[k] = *v;
    j["source"] = s;
  }
  if (l.configure) j["configure"] = true;
  if (!l.apt.empty()) j["apt"] = l.apt;
  if (!l.pip.empty()) j["pip"] = l.pip;
  if (!l.duplicates.empty()) j["duplicates"] = l.duplicates;
  if (!l.compression.empty()) j["compression"] = l.compression;
  if (!l.repositories.empty()) j["repositories"] = l.repositories;
  if (!l.pins.empty()) j["pins"] = l.pins;
  if (l.recommends) j["recommends"] = true;
  if (l.base) j["base"] = true;
  if (!l.priority.empty()) j["priority"] = l.priority;
  if (!l.build.empty()) {
    const BuildSpec& b = l.build;
    nlohmann::json run = nlohmann::json::array();
    for (const auto& argv : b.commands()) {
      bool shell = argv.size() == 3 && argv[0] == "/bin/sh" && argv[1] == "-c";
      run.push_back(shell ? nlohmann::json(argv[2]) : nlohmann::json(argv));
    }
    j["build"] = {{"env", env_json(b.env)}, {"run", run}};
    if (!b.workdir.empty()) j["build"]["workdir"] = b.workdir;
    if (b.network) j["build"]["network"] = true;
    if (!b.cache.empty()) j["build"]["cache"] = b.cache;
    if (!b.shared_caches.empty()) j["build"]["shared_caches"] = b.shared_caches;  // only when set: keys stay
    if (b.uid) j["build"]["user"] = std::to_string(*b.uid) + ":" + std::to_string(b.gid.value_or(*b.uid));
    if (b.timeout) j["build"]["timeout"] = b.timeout;
  }
}

void to_json(nlohmann::json& j, const Recipe& r) {
  j = nlohmann::json{{"stack", r.stack},
                     {"architecture", r.architecture},
                     {"layers", r.layers},
                     {"config",
                      {{"env", env_json(r.config.env)},
                       {"entrypoint", r.config.entrypoint},
                       {"cmd", r.config.cmd},
                       {"workdir", r.config.workdir},
                       {"user", r.config.user},
                       {"labels", r.config.labels},
                       {"ports", r.config.ports}}},
                     {"annotations", r.annotations},
                     {"tags", r.tags}};
  if (!r.from.value.empty()) j["from"] = r.from.value;
  if (r.source_date_epoch) j["source_date_epoch"] = *r.source_date_epoch;
  if (r.layer_budget) j["layer_budget"] = *r.layer_budget;
  if (!r.pip_constraint) j["pip_constraint"] = false;
  if (!r.release.empty()) j["release"] = r.release;
  if (!r.platform.python.empty()) j["platform"]["python"] = r.platform.python;
  if (!r.platform.glibc.empty()) j["platform"]["glibc"] = r.platform.glibc;
  if (!r.matrix.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& a : r.matrix.axes) m[a.key] = a.values;
    auto combos = [](const std::vector<MatrixCombo>& cs) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& c : cs) {
        nlohmann::json o = nlohmann::json::object();
        for (const auto& [k, v] : c.values) o[k] = v;
        out.push_back(o);
      }
      return out;
    };
    if (!r.matrix.include.empty()) m["include"] = combos(r.matrix.include);
    if (!r.matrix.exclude.empty()) m["exclude"] = combos(r.matrix.exclude);
    j["matrix"] = m;
  }
  if (!r.repositories.empty()) j["repositories"] = r.repositories;
  if (!r.pins.empty()) j["pins"] = r.pins;
  if (!r.push.empty()) {
    nlohmann::json p = nlohmann::json::array();
    for (const auto& t : r.push) p.push_back(t.value);
    j["push"] = p;
  }
  if (!r.tests.empty()) {
    nlohmann::json tests = nlohmann::json::array();
    for (const auto& t : r.tests) {
      nlohmann::json tj{{"name", t.name}, {"run", t.run.value}, {"gpu", t.gpu}};
      if (!t.expect.value.empty()) tj["expect"] = t.expect.value;
      if (t.exit != 0) tj["exit"] = t.exit;
      if (t.timeout) tj["timeout"] = t.timeout;
      tests.push_back(tj);
    }
    j["tests"] = tests;
  }
  if (!r.builtin_tests.enabled || !r.builtin_tests.components.empty()) {
    nlohmann::json b = nlohmann::json::object();
    for (const auto& [k, v] : r.builtin_tests.components) b[k] = v;
    j["builtin_tests"] = r.builtin_tests.enabled ? b : nlohmann::json(false);
  }
  if (!r.static_checks.empty()) {
    nlohmann::json s = nlohmann::json::object();
    if (!r.static_checks.arch_ignore.empty()) s["arch_ignore"] = r.static_checks.arch_ignore;
    if (!r.static_checks.libraries_ignore.empty()) s["libraries_ignore"] = r.static_checks.libraries_ignore;
    j["static_checks"] = s;
  }
}

}  // namespace sb
