#include "pipeline/lock.hpp"

#include <algorithm>

#include "pipeline/base_image.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/matrix_build.hpp"
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
                                        const BuildServices& services, const std::vector<bool>& which) {
  const auto& layers = planned.recipe.layers;
  std::vector<const LayerKind*> kinds = pinning_kinds(planned.recipe);
  bool src = std::any_of(layers.begin(), layers.end(), has_source);
  std::vector<nlohmann::json> out;
  for (size_t i = 0; i < planned.plan.points.size(); ++i) {
    const auto& p = planned.plan.points[i];
    if (!p.stack || (kinds.empty() && !src) || (!which.empty() && !which[i])) {
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

LockOutcome lock_recipe(const Planned& planned, const Store& store, const LockRequest& request, Status& status,
                        const BuildServices& services) {
  const fs::path path = resolve::lock_path(planned.recipe.file);
  std::error_code ec;
  const std::string before = fs::exists(path, ec) ? read_file(path) : "";
  const auto& points = planned.plan.points;
  std::vector<bool> which;  // --only: the points locked now; empty: every one
  if (!request.only.empty()) {
    if (before.empty())
      throw Error("--only: there is no lockfile " + path.string() + " yet; lock every point first", ErrorKind::Usage);
    which.assign(points.size(), false);
    for (size_t i : select_points(planned.recipe, planned.plan, request.only)) which[i] = true;
  }
  std::vector<nlohmann::json> extras = lock_extras(planned, store, status, services, which);  // apt, pip, redist, source
  registry::SessionOptions registry = request.registry;
  if (services.registry) registry.transport = services.registry;
  add_base_lock_extras(planned, extras, registry, status, which);  // from: its digest
  if (!which.empty()) {
    // The other points keep their entries, which must still be what the
    // plan resolves: a catalog change that moves them too is locked with them.
    const nlohmann::json old_lock = nlohmann::json::parse(before);
    const nlohmann::json now = nlohmann::json::parse(resolve::render_lock(planned.plan));
    extras.resize(points.size());
    for (size_t i = 0; i < points.size(); ++i) {
      if (which[i]) continue;
      const nlohmann::json* old_point = resolve::locked_point(old_lock, points[i].point);
      const nlohmann::json* new_point = resolve::locked_point(now, points[i].point);
      auto field = [](const nlohmann::json* p, const char* f) { return p ? p->value(f, nlohmann::json()) : nlohmann::json(); };
      if (!old_point || field(old_point, "resolved") != field(new_point, "resolved") ||
          field(old_point, "unsatisfiable") != field(new_point, "unsatisfiable"))
        throw Error("--only: point " + points[i].point.id() + (old_point ? " resolves otherwise now" : " is not in the lock") +
                        "; add it to --only, or lock every point",
                    ErrorKind::Input);
      extras[i] = nlohmann::json::object();
      for (const auto& [k, v] : old_point->items())
        if (k != "matrix" && k != "resolved" && k != "unsatisfiable") extras[i][k] = v;
    }
  }
  LockOutcome out;
  out.changes = resolve::lock_diff(before, resolve::render_lock(planned.plan, extras));
  if (!before.empty()) {  // what the new lock changes, for review, before it is written
    std::string text = out.changes.empty() ? "the lock pins what it pinned before"
                                           : "changes to " + path.string() + " (" +
                                                 std::to_string(out.changes.size()) + "):";
    for (const auto& c : out.changes) text += "\n  " + c;
    status.message(Level::Info, text);
    status.event("lock_changes", {{"lockfile", path.string()}, {"changes", out.changes}});
  }
  out.path = write_lock(planned, extras);
  return out;
}

std::vector<std::string> lock_problems(const Planned& planned) {
  const fs::path path = resolve::lock_path(planned.recipe.file);
  std::error_code ec;
  if (!fs::exists(path, ec)) return {"there is no lockfile " + path.string()};
  std::vector<std::string> out = resolve::lock_changes(read_file(path), path.string(), planned.plan);
  for (const auto& p : planned.plan.points) {
    if (!p.stack) continue;
    try {
      (void)locked_point_inputs(planned, p);  // every fetching layer's entry, written for what it asks now
      (void)locked_base(planned, p);          // from: a pinned digest
    } catch (const Error& e) {
      // Its lines that name a layer ("  layer 'x' (r.yaml:5:5): packages
      // added: curl"), else its first line, each under the point's name.
      std::vector<std::string> lines;
      std::string text = e.what();
      for (size_t at = 0; at < text.size();) {
        size_t end = std::min(text.find('\n', at), text.size());
        std::string line = text.substr(at, end - at);
        if (line.starts_with("  layer ")) lines.push_back(line.substr(2));
        at = end + 1;
      }
      if (lines.empty()) lines.push_back(text.substr(0, text.find('\n')));
      for (const auto& l : lines) out.push_back("point " + p.point.id() + ": " + l);
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

std::optional<nlohmann::json> locked_entry(const PointInputs& point, const char* section, const std::string& layer) {
  if (point.lock.empty()) return std::nullopt;
  nlohmann::json lock = nlohmann::json::parse(point.lock);
  if (!lock.contains(section) || !lock[section].contains(layer)) return std::nullopt;
  return lock[section][layer];
}

}  // namespace sb
