#include "pipeline/lock.hpp"

#include <algorithm>

#include "pipeline/apt_layer.hpp"
#include "pipeline/pip_layer.hpp"
#include "pipeline/redist_layer.hpp"
#include "pipeline/source_tree.hpp"
#include "resolve/lockfile.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb {

std::vector<nlohmann::json> lock_extras(const Planned& planned, const Store& store, Status& status) {
  const auto& layers = planned.recipe.layers;
  bool apt = std::any_of(layers.begin(), layers.end(), is_apt_layer);
  bool pip = std::any_of(layers.begin(), layers.end(), is_pip_layer);
  bool redist = std::any_of(layers.begin(), layers.end(), is_redist_layer);
  bool src = std::any_of(layers.begin(), layers.end(),
                         [](const LayerSpec& l) { return l.from_source() || l.keeps_source_beside(); });
  std::vector<nlohmann::json> out;
  for (const auto& p : planned.plan.points) {
    if (!p.stack || !(apt || pip || redist || src)) {
      out.push_back(nullptr);
      continue;
    }
    try {
      Recipe r = resolve::instantiate(planned.recipe, p);
      auto vars = resolve::point_variables(planned.recipe, p);
      PointInputs in = point_inputs(p, planned.catalog);
      nlohmann::json e = nlohmann::json::object();
      if (apt) e["apt"] = lock_apt_layers(r, vars, in, store, status);
      if (pip) e["pip"] = lock_pip_layers(r, vars, in, store, status);
      if (redist) e["redist"] = lock_redist_layers(r, vars, in, store, status);
      if (src) {
        nlohmann::json pins = lock_source_layers(r, vars, in, store, status);
        if (!pins.empty()) e["source"] = pins;
      }
      out.push_back(e);
    } catch (Error& e) {
      e.add_trace("while locking what the layers of point " + p.point.id() + " fetch");
      throw;
    }
  }
  return out;
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
  for (const auto& spec : r.layers) {
    const char* kind = is_apt_layer(spec) ? "apt" : is_pip_layer(spec) ? "pip" : is_redist_layer(spec) ? "redist" : "";
    if (!*kind) continue;
    std::string where = "layer '" + spec.name + "' (" + spec.where.str() + ")";
    if (!lock.contains(kind) || !lock[kind].is_object() || !lock[kind].contains(spec.name)) {
      problems.push_back(where + ": the lockfile pins no " + std::string(kind) + " files for it");
      continue;
    }
    const nlohmann::json& entry = lock[kind][spec.name];  // by reference: see above
    std::string d;
    try {
      if (std::string(kind) == "pip") d = pip_lock_mismatch(r, spec, vars, in, entry);
      else if (std::string(kind) == "redist") d = redist_lock_mismatch(r, spec, vars, in, entry);
      else d = apt_lock_mismatch(r, spec, entry);
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
      if (!lock.contains("source") || !lock["source"].is_object() || !lock["source"].contains(spec.name)) {
        problems.push_back(where + (has_git_source(spec, vars, in) ? ": the lockfile pins no commit for its git source"
                                                                   : ": the lockfile pins no source for it"));
        continue;
      }
      std::string d = source_lock_mismatch(spec, vars, in, lock["source"][spec.name]);
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
  nlohmann::json pins = nlohmann::json::object();
  for (const char* kind : {"apt", "pip", "redist", "source"})
    if (lock.contains(kind)) pins[kind] = lock[kind];
  in.lock = pins.dump();
  return in;
}

}  // namespace sb
