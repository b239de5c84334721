// make_plan(): recipe + catalog -> one resolved stack (or conflict) per
// matrix point. Points asking the same thing share one resolution.
#include "resolve/plan.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "recipe/variables.hpp"

namespace sb::resolve {

namespace {

// A layer's `use:` name as a catalog component, and the alias it named, if any
// (`use: debian` is component os, version "debian").
struct UseOf {
  const LayerSpec* layer;
  std::string component, alias;
};

// Which kind of source a `use:` layer takes `component` from, so that the
// resolver picks a version that exists there: `from:` redist, wheel (pip) or
// apt; without `from:`, a plain `use:` layer is built from NVIDIA's redist
// archives when the catalog has any for the component. "" = any.
std::string source_kind(const LayerSpec& l, const catalog::Catalog& cat, const std::string& component) {
  if (l.from == "redist" || l.from == "apt") return l.from;
  if (l.from == "wheel") return "pip";
  if (!l.from.empty() || !l.apt.empty() || !l.pip.empty() || !l.build.empty() || !l.copy.empty()) return "";
  const catalog::Component* c = cat.find(component);
  if (!c) return "";
  for (const auto& r : c->records)
    if (r.sources.redist) return "redist";
  return "";
}

std::vector<UseOf> uses_of(const Recipe& r, const catalog::Catalog& cat) {
  std::vector<UseOf> out;
  std::vector<std::string> names = cat.component_names();
  for (const auto& l : r.layers) {
    for (const auto& u : l.use) {
      if (cat.index_of(u) >= 0) {
        out.push_back({&l, u, ""});
        continue;
      }
      std::string found;
      for (const auto& c : cat.components)
        for (const auto& rec : c.records)
          if (found.empty() && std::find(rec.aliases.begin(), rec.aliases.end(), u) != rec.aliases.end())
            found = c.name;
      if (!found.empty()) {
        out.push_back({&l, found, u});
        continue;
      }
      std::string best = suggest(u, names);
      std::string all;
      for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
      throw InputError(l.at("use"), "layer '" + l.name + "' uses '" + u + "', which is not in the catalog" +
                                        (best.empty() ? "" : " (did you mean '" + best + "'?)"),
                       all.empty() ? "the catalog is empty" : "the catalog's components are: " + all);
    }
  }
  return out;
}

// Every ${var} must name something that can have a value; a version may use
// only what is known before resolving (matrix values, stack, release).
void check_variables(const Recipe& r, const Matrix& m, const catalog::Catalog& cat) {
  std::set<std::string> given{"stack"};
  if (!r.release.empty()) given.insert("release");
  for (const auto& a : m.axes) given.insert(a.key);
  for (const auto& inc : m.include)
    for (const auto& [k, v] : inc.values) given.insert(k);
  std::vector<std::string> known(given.begin(), given.end());
  for (const auto& n : cat.component_names())
    if (!given.count(n)) known.push_back(n);
  if (!given.count("arch")) known.push_back("arch");  // the resolved stack's arch list
  for (const char* n : {"platform", "arch_name"})     // the point's platform: linux/arm64, arm64
    if (!given.count(n)) known.push_back(n);
  for (const char* n : {"driver_min", "nvidia_require_cuda"})  // what the stack needs of the host
    if (!given.count(n)) known.push_back(n);
  for (const auto& n : cat.component_names()) known.push_back(n + "_build");  // ${pytorch_build}

  auto uses = variable_uses(r);
  for (const auto& u : uses) {
    bool component = cat.index_of(u.name) >= 0;
    if (u.in_version && !given.count(u.name)) {
      if (component || u.name == "arch")
        throw InputError(u.where, "a version cannot use '${" + u.name + "}': " + u.name +
                                      " is chosen by the resolver, not given",
                         "add " + u.name + " to the matrix to choose it there");
    }
    if (std::find(known.begin(), known.end(), u.name) != known.end()) continue;
    std::string best = suggest(u.name, known);
    std::string all;
    for (const auto& k : known) all += (all.empty() ? "" : ", ") + ("${" + k + "}");
    throw InputError(u.where, "undefined variable '${" + u.name + "}'" +
                                  (best.empty() ? "" : " (did you mean '${" + best + "}'?)"),
                     "variables are matrix keys, catalog components (and their ${<name>_build}), ${arch}, ${platform}, "
                     "${arch_name}, ${driver_min}, ${nvidia_require_cuda}, ${stack} and ${release}: " + all);
  }
  for (const auto& a : m.axes) {
    if (a.key == "arch" || a.key == "release" || a.key == "platform" || cat.index_of(a.key) >= 0) continue;
    if (std::any_of(uses.begin(), uses.end(), [&](const VariableUse& u) { return u.name == a.key; })) continue;
    std::string best = suggest(a.key, cat.component_names());
    throw InputError(a.where, "matrix key '" + a.key + "' is not a catalog component, and no ${" + a.key +
                                  "} uses it" + (best.empty() ? "" : " (did you mean '" + best + "'?)"),
                     "matrix keys choose components (cuda, pytorch, python), arch, platform, or values used as ${key}");
  }
}

std::vector<std::string> keys_of(const std::map<std::string, std::string>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

}  // namespace

std::string point_architecture(const Recipe& recipe, const Point& p) {
  if (const MatrixValue* v = p.get("platform"); v && !v->items.empty()) {
    std::string a = platform_architecture(v->items.front());
    if (!a.empty()) return a;
  }
  return recipe.architecture;
}

size_t Plan::unsatisfiable() const {
  return static_cast<size_t>(std::count_if(points.begin(), points.end(), [](const PlanPoint& p) { return !p.stack; }));
}

std::map<std::string, std::string> point_variables(const Recipe& recipe, const PlanPoint& p) {
  std::map<std::string, std::string> vars{{"stack", recipe.stack}};
  if (!recipe.release.empty()) vars["release"] = recipe.release;
  vars["arch_name"] = point_architecture(recipe, p.point);
  vars["platform"] = "linux/" + vars["arch_name"];
  if (p.stack) {
    for (const auto& [c, v] : p.stack->versions) vars[c] = v;
    // Which build of a version (pytorch 2.7.0 "cu126"), for the stages that
    // pick a record's sources: ${pytorch_build}.
    for (const auto& [c, b] : p.stack->builds) vars[c + "_build"] = b;
    // What the stack needs of the host, for image config (NVIDIA_REQUIRE_CUDA).
    if (!p.stack->driver_min.empty()) vars["driver_min"] = p.stack->driver_min;
    if (!p.stack->nvidia_require_cuda.empty()) vars["nvidia_require_cuda"] = p.stack->nvidia_require_cuda;
    if (!p.stack->arch.empty()) {
      std::string a;
      for (const auto& x : p.stack->arch) a += (a.empty() ? "" : ";") + x;
      vars["arch"] = a;
    }
  }
  for (const auto& [k, v] : p.point.values) vars[k] = v.str();
  return vars;
}

Recipe instantiate(const Recipe& recipe, const PlanPoint& p) {
  auto vars = point_variables(recipe, p);
  std::vector<std::string> known = keys_of(vars);
  VariableLookup lookup = [&](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  std::string ctx = "at point " + p.point.id();
  auto expand = [&](Text& t) { t.value = expand_variables(t, lookup, known, ctx); };
  Recipe r = recipe;
  r.architecture = point_architecture(recipe, p.point);  // matrix key `platform`, else `architecture:`
  for (auto& [k, v] : r.config.env) expand(v);
  // Labels and annotations ("version: ${pytorch}") as Docker expands a LABEL's ARGs.
  auto at = [&](const char* key) {
    auto it = r.key_where.find(key);
    return it == r.key_where.end() ? SourceLocation{r.file.string(), 0, 0} : it->second;
  };
  for (auto& [k, v] : r.config.labels) v = expand_variables(Text{v, at("config")}, lookup, known, ctx);
  for (auto& [k, v] : r.annotations) v = expand_variables(Text{v, at("annotations")}, lookup, known, ctx);
  for (size_t i = 0; i < r.tags.size(); ++i) {
    Text t{r.tags[i], i < r.tag_where.size() ? r.tag_where[i] : r.tags_where};
    r.tags[i] = expand_variables(t, lookup, known, ctx);
  }
  for (auto& t : r.push) expand(t);
  expand(r.from);
  for (auto& l : r.layers) {
    for (auto& c : l.copy) {
      c.src = expand_variables(Text{c.src, c.where}, lookup, known, ctx);
      c.dst = expand_variables(Text{c.dst, c.where}, lookup, known, ctx);
      if (c.dst.empty() || c.dst[0] != '/' || ("/" + c.dst + "/").find("/../") != std::string::npos)
        throw InputError(c.where, "copy.dst is '" + c.dst + "' " + ctx +
                                      ": it must be an absolute path in the image without '..'");
    }
    for (auto& [k, v] : l.build.env) expand(v);
    for (auto& cmd : l.build.run) expand(cmd);
    if (!l.keep_source.empty()) {
      l.keep_source = expand_variables(Text{l.keep_source, l.at("keep_source")}, lookup, known, ctx);
      if (l.keep_source.find_first_not_of('/') == std::string::npos || l.keep_source[0] != '/' ||
          ("/" + l.keep_source + "/").find("/../") != std::string::npos)
        throw InputError(l.at("keep_source"), "keep_source is '" + l.keep_source + "' " + ctx +
                                                  ": it must be an absolute path below the image root without '..'");
    }
    l.source.git = expand_variables(Text{l.source.git, l.source.where}, lookup, known, ctx);
    l.source.ref = expand_variables(Text{l.source.ref, l.source.where}, lookup, known, ctx);
    l.source.version = expand_variables(Text{l.source.version, l.source.where}, lookup, known, ctx);
    l.source.suite = expand_variables(Text{l.source.suite, l.source.where}, lookup, known, ctx);
    for (const auto& [list, key] : {std::pair{&l.apt, "apt"}, std::pair{&l.pip, "pip"}, std::pair{&l.packages, "packages"}})
      for (auto& item : *list) item = expand_variables(Text{item, l.at(key)}, lookup, known, ctx);
  }
  for (auto& t : r.tests) {
    expand(t.run);
    expand(t.expect);
  }
  return r;
}

Plan make_plan(const Recipe& recipe, const catalog::Catalog& cat, const std::vector<Override>& sets) {
  Matrix m = recipe.matrix;
  std::vector<std::string> new_keys = cat.component_names();
  new_keys.insert(new_keys.end(), {"arch", "release", "platform"});
  apply_overrides(m, sets, new_keys);
  check_variables(recipe, m, cat);
  const std::vector<UseOf> uses = uses_of(recipe, cat);

  Plan plan{recipe.file.string(), recipe.stack, {}};
  std::unordered_map<std::string, Result> memo;
  for (Point& point : expand_matrix(m)) {
    std::map<std::string, std::string> given;
    for (const auto& [k, v] : point.values) given[k] = v.str();
    if (!recipe.release.empty() && !given.count("release")) given["release"] = recipe.release;
    given.emplace("stack", recipe.stack);
    VariableLookup lookup = [&](const std::string& n) -> std::optional<std::string> {
      auto it = given.find(n);
      return it == given.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    Request req;  // matrix values first, then what layers ask; the same want once
    auto want = [&](const std::string& component, const std::string& version, const SourceLocation& where,
                    const std::string& source = "") {
      for (auto& w : req.wants)
        if (w.component == component && w.version == version) {  // the same want: keep the kind
          if (w.source.empty()) w.source = source;
          return;
        }
      req.wants.push_back({component, version, where, source});
    };
    for (const auto& [k, v] : point.values) {
      if (k == "arch") {
        req.arch = v.items;
        req.arch_where = v.where;
      } else if (cat.index_of(k) >= 0) {
        want(k, v.str(), v.where);
      }
    }
    for (const auto& u : uses) {
      std::string kind = source_kind(*u.layer, cat, u.component);
      if (!u.alias.empty()) want(u.component, u.alias, u.layer->at("use"), kind);
      if (!u.layer->version.value.empty())
        want(u.component, expand_variables(u.layer->version, lookup, keys_of(given), "at point " + point.id()),
             u.layer->version.where, kind);
      else if (u.alias.empty())
        want(u.component, "", u.layer->at("use"), kind);
    }
    std::string key;
    for (const auto& w : req.wants) key += w.component + '\x1f' + w.version + '\x1f' + w.where.str() + '\x1f' + w.source + '\x1e';
    for (const auto& a : req.arch) key += a + '\x1f';
    key += req.arch_where.str();
    auto it = memo.find(key);
    if (it == memo.end()) it = memo.emplace(key, resolve_point(cat, req)).first;

    PlanPoint pp{std::move(point), it->second.stack, it->second.conflict, {}, {}};
    if (pp.stack) {
      Recipe r = instantiate(recipe, pp);
      pp.tags = r.tags;
      for (const auto& t : r.push) pp.push.push_back(t.value);
    }
    plan.points.push_back(std::move(pp));
  }
  // Two points tagged alike would overwrite each other's image, unless they
  // differ only in platform: then the tag names an image index over them.
  std::map<std::string, std::vector<const PlanPoint*>> tagged;
  for (const auto& p : plan.points)
    for (size_t i = 0; i < p.tags.size(); ++i) {
      auto& owners = tagged[p.tags[i]];
      const PlanPoint* clash = nullptr;
      for (const PlanPoint* o : owners)
        if (o != &p && (o->point.id_without("platform") != p.point.id_without("platform") ||
                        point_architecture(recipe, o->point) == point_architecture(recipe, p.point)))
          clash = o;
      if (std::find(owners.begin(), owners.end(), &p) == owners.end()) owners.push_back(&p);
      if (clash)
        throw InputError(i < recipe.tag_where.size() ? recipe.tag_where[i] : recipe.tags_where,
                         "tag '" + p.tags[i] + "' names two matrix points: " + clash->point.id() + " and " +
                             p.point.id(),
                         "use the matrix values that differ in the tag, e.g. ${cuda} (points that differ only in "
                         "platform may share one)");
    }
  return plan;
}

nlohmann::json matrix_json(const Point& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : p.values) j[k] = v;
  return j;
}

void to_json(nlohmann::json& j, const PlanPoint& p) {
  j = {{"matrix", matrix_json(p.point)}};
  if (p.stack) {
    j["tags"] = p.tags;
    if (!p.push.empty()) j["push"] = p.push;
    j["resolved"] = *p.stack;
  } else if (p.conflict) {
    j["unsatisfiable"] = *p.conflict;
  }
}

void to_json(nlohmann::json& j, const Plan& p) {
  size_t bad = p.unsatisfiable();
  j = {{"recipe", p.recipe},
       {"stack", p.stack},
       {"points", p.points},
       {"summary", {{"points", p.points.size()}, {"satisfiable", p.points.size() - bad}, {"unsatisfiable", bad}}}};
}

}  // namespace sb::resolve
