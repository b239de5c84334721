// The Plan: every matrix point of a recipe, resolved against the catalog, or
// the conflict that makes it unsatisfiable. Points that cannot be satisfied
// stay in the plan with their reasons; they are never dropped.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catalog/catalog.hpp"
#include "recipe/recipe.hpp"
#include "resolve/matrix.hpp"
#include "resolve/resolve.hpp"

namespace sb::resolve {

struct PlanPoint {
  Point point;
  std::optional<ResolvedStack> stack;  // set when the point resolves
  std::optional<Conflict> conflict;    // set when it does not
  std::vector<std::string> tags;       // with ${vars} expanded (resolved points only)
  std::vector<std::string> push;
};

struct Plan {
  std::string recipe;  // the recipe's path as given
  std::string stack;
  std::vector<PlanPoint> points;

  size_t unsatisfiable() const;
};

// Expands the matrix (after `sets`), checks every ${var} of the recipe, and
// resolves each point. Throws sb::InputError for a recipe mistake the catalog
// reveals: an unknown component in `use:`, an undefined variable, a
// malformed version, a matrix key nothing uses.
Plan make_plan(const Recipe& recipe, const catalog::Catalog& catalog, const std::vector<Override>& sets = {});

// The point's OCI architecture: its matrix `platform` (linux/arm64 -> arm64),
// else the recipe's `architecture:`.
std::string point_architecture(const Recipe& recipe, const Point& p);

// The values ${name} takes at a resolved point: matrix values first (a matrix
// key's value is what the user wrote: cuda=12.6), then the resolved versions
// of the other components, `arch` (';'-joined), `platform` (linux/arm64) and
// `arch_name` (arm64), `stack` and `release`.
std::map<std::string, std::string> point_variables(const Recipe& recipe, const PlanPoint& p);

// The recipe at one resolved point: tags, env, build steps and tests with
// their ${vars} expanded. Throws InputError for a variable with no value there.
Recipe instantiate(const Recipe& recipe, const PlanPoint& p);

void to_json(nlohmann::json& j, const PlanPoint& p);
void to_json(nlohmann::json& j, const Plan& p);
nlohmann::json matrix_json(const Point& p);  // {"arch": ["8.0"], "cuda": "12.6"}

}  // namespace sb::resolve
