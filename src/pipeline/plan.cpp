#include "pipeline/plan.hpp"

#include <cstdlib>

#include "pipeline/point_inputs.hpp"
#include "pipeline/source_tree.hpp"
#include "recipe/variables.hpp"
#include "resolve/lockfile.hpp"
#include "util/file.hpp"

namespace sb {

std::optional<fs::path> find_catalog(const fs::path& recipe_file) {
  std::error_code ec;
  fs::path dir = fs::absolute(recipe_file, ec).lexically_normal().parent_path();
  while (!dir.empty()) {
    if (fs::is_directory(dir / "layers", ec)) {
      fs::path found = fs::proximate(dir / "layers", ec);  // short paths in messages
      return ec ? dir / "layers" : found;
    }
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  // Then the catalog this stackbuild was built with, so a recipe anywhere plans.
#ifdef SB_DEFAULT_CATALOG
  if (fs::is_directory(SB_DEFAULT_CATALOG, ec)) return fs::path(SB_DEFAULT_CATALOG);
#endif
  return std::nullopt;
}

bool needs_plan(const Recipe& recipe) {
  return recipe.needs_components() || !recipe.matrix.empty() || !variable_uses(recipe).empty();
}

Planned plan_recipe(Recipe recipe, const PlanOptions& options) {
  Planned out{std::move(recipe), {}, nullptr, {}};
  const Recipe& r = out.recipe;
  bool needed = r.needs_components() || !r.matrix.axes.empty() || !r.matrix.include.empty() || !options.sets.empty();
  const char* env = getenv("STACKBUILD_CATALOG");
  if (options.catalog) {
    out.catalog_dir = *options.catalog;
  } else if (env && *env) {
    out.catalog_dir = env;
  } else if (auto found = find_catalog(r.file)) {
    out.catalog_dir = *found;
  } else if (needed) {
    throw Error("no catalog found: looked for layers/ beside " + r.file.string() +
                    " and in each directory above it, and for the built-in one; give --catalog DIR "
                    "or set STACKBUILD_CATALOG",
                ErrorKind::Input);
  }
  if (!out.catalog_dir.empty()) {
    try {
      out.catalog = std::make_shared<const catalog::Catalog>(catalog::load_catalog(out.catalog_dir));
    } catch (Error& e) {
      e.add_trace("while loading the catalog " + out.catalog_dir.string());
      throw;
    }
  }
  std::vector<resolve::Override> sets;
  for (const auto& s : options.sets) sets.push_back(resolve::parse_override(s));
  try {
    out.plan = resolve::make_plan(r, out.catalog ? *out.catalog : catalog::Catalog{}, sets);
  } catch (Error& e) {
    e.add_trace("while planning " + r.file.string());
    throw;
  }
  // Git sources that would run commands are refused here, before any stage runs git.
  for (const auto& p : out.plan.points) {
    if (!p.stack) continue;
    try {
      check_git_sources(resolve::instantiate(r, p), resolve::point_variables(r, p), point_inputs(p, out.catalog));
    } catch (Error& e) {
      e.add_trace("while checking the sources of point " + p.point.id());
      throw;
    }
  }
  return out;
}

fs::path write_lock(const Planned& planned, const std::vector<nlohmann::json>& extras) {
  fs::path path = resolve::lock_path(planned.recipe.file);
  write_file_atomic(path, resolve::render_lock(planned.plan, extras));
  return path;
}

void check_lock(const Planned& planned) {
  fs::path path = resolve::lock_path(planned.recipe.file);
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error("--locked: there is no lockfile " + path.string() + "\n  write it with 'stackbuild lock " +
                    planned.recipe.file.string() + "'",
                ErrorKind::Input);
  auto changes = resolve::lock_changes(read_file(path), path.string(), planned.plan);
  if (changes.empty()) return;
  std::string msg = "--locked: the lockfile " + path.string() + " is stale (" + std::to_string(changes.size()) +
                    (changes.size() == 1 ? " change" : " changes") + "):";
  for (const auto& c : changes) msg += "\n  " + c;
  msg += "\n  review the changes, then run 'stackbuild lock " + planned.recipe.file.string() + "'";
  throw Error(msg, ErrorKind::Input);
}

std::string unsatisfiable_report(const resolve::Plan& plan) {
  std::string s = std::to_string(plan.unsatisfiable()) + " of " + std::to_string(plan.points.size()) +
                  " matrix points are unsatisfiable:";
  for (const auto& p : plan.points) {
    if (p.stack || !p.conflict) continue;
    s += "\n  " + p.point.id() + ": " + p.conflict->summary;
    for (const auto& r : p.conflict->reasons) s += "\n    " + r;
  }
  return s;
}

}  // namespace sb
