// Planning a recipe: read it, find and load the catalog, expand and resolve
// the matrix; and the lockfile on disk (written atomically, checked by
// `build --locked`).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.hpp"
#include "recipe/recipe.hpp"
#include "resolve/plan.hpp"

namespace sb {

struct PlanOptions {
  std::optional<fs::path> catalog;  // --catalog DIR; default: STACKBUILD_CATALOG, else find_catalog()
  std::vector<std::string> sets;    // --set key=value, in order
};

struct Planned {
  Recipe recipe;
  fs::path catalog_dir;  // empty when the recipe needs no catalog and none was found
  // The catalog loaded from catalog_dir, once: the layers take their records
  // from it (PointInputs::catalog). Null when catalog_dir is empty.
  std::shared_ptr<const catalog::Catalog> catalog;
  resolve::Plan plan;
};

// The `layers/` directory next to the recipe, else next to one of its
// parent directories, nearest first; nullopt when there is none.
std::optional<fs::path> find_catalog(const fs::path& recipe_file);

// Whether the recipe must be planned before building: a matrix, components,
// or ${vars}. A copy-only recipe without them builds as written.
bool needs_plan(const Recipe& recipe);

// Loads the catalog (when one is needed or found: --catalog, else
// STACKBUILD_CATALOG, else find_catalog()) and plans `recipe`.
// Throws InputError for recipe mistakes, Error(ErrorKind::Input) when a needed
// catalog is nowhere to be found.
Planned plan_recipe(Recipe recipe, const PlanOptions& options);

// Writes <recipe>.lock (atomically: a failure leaves the old one, or none);
// `extras[i]` (what later stages pin, e.g. {"apt": ...}) joins point i.
fs::path write_lock(const Planned& planned, const std::vector<nlohmann::json>& extras = {});

// Throws Error(ErrorKind::Input) when <recipe>.lock is missing or differs from the
// plan, listing what changed (point, component: old -> new).
void check_lock(const Planned& planned);

// "3 of 12 matrix points are unsatisfiable:" and each point with its reasons;
// thrown as Error(ErrorKind::Unsatisfiable) by --strict.
std::string unsatisfiable_report(const resolve::Plan& plan);

}  // namespace sb
