#include "pipeline/lock.hpp"

#include <algorithm>

#include "pipeline/base_image.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/source_tree.hpp"
#include "resolve/lockfile.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb {

namespace {

// The kinds that pin something and handle a layer of `recipe`, in
// registration order: the sections its lock entries have.
std::vector<const LayerKind*> pinning_kinds(const Recipe& recipe) {
  std::vector<const LayerKind*> out;
  for (const LayerKind* kind : layer_kinds())
    if (kind->lock_section() && std::any_of(recipe.layers.begin(), recipe.layers.end(),
                                            [&](const LayerSpec& l) { return kind->handles(l); }))
      out.push_back(kind);
  return out;
}

// The "source" section is no kind's: a source tree is built by the steps
// kind or kept beside another kind's packages (source_tree.hpp), and pinned
// the same either way.
constexpr const char* kSourceSection = "source";

}  // namespace

std::vector<nlohmann::json> lock_extras(const Planned& planned, const Store& store, Status& status,
                                        const BuildServices& services) {
  const auto& layers = planned.recipe.layers;
  std::vector<const LayerKind*> kinds = pinning_kinds(planned.recipe);
  bool src = std::any_of(layers.begin(), layers.end(), has_source);
  std::vector<nlohmann::json> out;
  for (const auto& p : planned.plan.points) {
    if (!p.stack || (kinds.empty() && !src)) {
      out.push_back(nullptr);
      continue;
    }
    try {
      Recipe r = resolve::instantiate(planned.recipe, p);
      auto vars = resolve::point_variables(planned.recipe, p);
      PointInputs in = point_inputs(p, planned.catalog);
      LockContext context{r, vars, in, services};
      nlohmann::json e = nlohmann::json::object();
      for (const LayerKind* kind : kinds) e[kind->lock_section()] = kind->lock(context, store, status);
      if (src) {
        nlohmann::json pins = lock_source_layers(r, vars, in, store, status, services.make_fetcher);
        if (!pins.empty()) e[kSourceSection] = pins;
      }
      out.push_back(e);
    } catch (Error& e) {
      e.add_trace("while locking what the layers of point " + p.point.id() + " fetch");
      throw;
    }
  }
  return out;
}

fs::path lock_recipe(const Planned& planned, const Store& store, registry::SessionOptions registry, Status& status,
                     const BuildServices& services) {
  std::vector<nlohmann::json> extras = lock_extras(planned, store, status, services);  // apt, pip, redist, source
  if (services.registry) registry.transport = services.registry;
  add_base_lock_extras(planned, extras, registry, status);  // from: its digest
  return write_lock(planned, extras);
}

PointInputs locked_point_inputs(const Planned& planned, const resolve::PlanPoint& point) {
  PointInputs in = point_inputs(point, planned.catalog);
  fs::path path = resolve::lock_path(planned.recipe.file);
  std::error_code ec;
  if (!fs::exists(path, ec)) return in;  // check_lock() has said so already
  // Entries are read where they stand in the parsed file, so that a JSON
  // error names their place in it ("/points/1/pip/torch/wheels/0/size").
  const nlohmann::json doc = nlohmann::json::parse(read_file(path), nullptr, false);
  const nlohmann::json* locked = resolve::locked_point(doc, point.point);
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& lock = locked ? *locked : none;
  Recipe r = resolve::instantiate(planned.recipe, point);
  auto vars = resolve::point_variables(planned.recipe, point);
  std::vector<std::string> problems;
  const BuildServices no_services;  // nothing is fetched: the checks read the context alone
  LockContext context{r, vars, in, no_services};
  for (const auto& spec : r.layers) {
    const LayerKind& kind = layer_kind_of(spec);
    const char* section = kind.lock_section();
    if (!section) continue;
    std::string where = "layer '" + spec.name + "' (" + spec.where.str() + ")";
    if (!lock.contains(section) || !lock[section].is_object() || !lock[section].contains(spec.name)) {
      problems.push_back(where + ": the lockfile pins no " + std::string(section) + " files for it");
      continue;
    }
    const nlohmann::json& entry = lock[section][spec.name];  // by reference: see above
    std::string d;
    try {
      d = kind.lock_mismatch(context, spec, entry);
    } catch (const nlohmann::json::exception& e) {
      d = std::string("a malformed entry: ") + e.what();
    } catch (const Error& e) {
      d = e.what();
    }
    if (!d.empty()) problems.push_back(where + ": " + d);
  }
  // Source trees (a source build's, or one kept beside packages): a git tag
  // or branch may move, so the lockfile pins the commit; an archive's sha256,
  // a local tree and each patch must be what was locked.
  for (const auto& spec : r.layers) {
    std::string where = "layer '" + spec.name + "' (" + spec.where.str() + ")";
    try {
      if (!has_source(spec)) continue;
      if (!lock.contains(kSourceSection) || !lock[kSourceSection].is_object() ||
          !lock[kSourceSection].contains(spec.name)) {
        problems.push_back(where + (has_git_source(spec, vars, in) ? ": the lockfile pins no commit for its git source"
                                                                   : ": the lockfile pins no source for it"));
        continue;
      }
      std::string d = source_lock_mismatch(spec, vars, in, lock[kSourceSection][spec.name]);
      if (!d.empty()) problems.push_back(where + ": " + d);
    } catch (const nlohmann::json::exception& e) {
      problems.push_back(where + ": a malformed entry: " + e.what());
    } catch (const Error& e) {
      problems.push_back(where + ": " + e.what());
    }
  }
  if (!problems.empty()) {
    std::string msg = "--locked: the lockfile " + path.string() + " does not pin what point " + point.point.id() +
                      " fetches now:";
    for (const auto& p : problems) msg += "\n  " + p;
    msg += "\n  review the recipe, then run 'stackbuild lock " + planned.recipe.file.string() + "'";
    throw Error(msg, ErrorKind::Input);
  }
  nlohmann::json pins = nlohmann::json::object();  // the layers' sections, for their builders (options.point.lock)
  for (const LayerKind* kind : layer_kinds())
    if (const char* section = kind->lock_section(); section && lock.contains(section)) pins[section] = lock[section];
  if (lock.contains(kSourceSection)) pins[kSourceSection] = lock[kSourceSection];
  in.lock = pins.dump();
  return in;
}

}  // namespace sb
