// The lockfile's entries of what layers fetch, per matrix point: the apt
// packages, the pip wheels and the NVIDIA redist archives, each with URL,
// size and sha256. `stackbuild lock` writes them (lock_extras); `build
// --locked` reads them back (locked_point_inputs) so that exactly the pinned
// files are fetched, and refuses entries written for other inputs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catalog/catalog.hpp"
#include "pipeline/build.hpp"
#include "pipeline/plan.hpp"
#include "resolve/plan.hpp"

namespace sb {

// The resolved components of `point` (empty for an unresolved one).
PointInputs point_inputs(const resolve::PlanPoint& point);

// The catalog record chosen for `component` at the point: its exact version
// and build; without one (a recipe built without a plan), the record whose
// version or alias is `fallback`. Null when there is none.
const catalog::Record* chosen_record(const catalog::Catalog& catalog, const std::string& component,
                                     const PointInputs& point, const std::string& fallback);

// For `stackbuild lock`: per plan point, {"apt": ..., "pip": ..., "redist": ...}
// with the kinds of layer the recipe has; null for unresolved points.
std::vector<nlohmann::json> lock_extras(const Planned& planned, const Store& store, Status& status);

// For `build --locked`: the point's inputs with the lockfile's entries. Throws
// Error(kExitInput) when a layer that fetches has no entry in the lockfile, or
// its entry was written for other requirements, manifests or targets, naming
// the layer and what changed. Call after check_lock().
PointInputs locked_point_inputs(const Planned& planned, const resolve::PlanPoint& point);

}  // namespace sb
