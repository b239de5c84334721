// What the plan chose at one matrix point, for the layers that read the
// catalog (apt, pip, redist and source trees): the resolved versions and
// builds, the catalog they were chosen from, and with `build --locked` the
// lockfile's entries of the point (pipeline/lock.hpp). The catalog is loaded
// once, by plan_recipe(); no layer loads one.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "catalog/catalog.hpp"
#include "resolve/plan.hpp"

namespace sb {

struct PointInputs {
  std::map<std::string, std::string> versions;  // component -> exact version (resolve::ResolvedStack)
  std::map<std::string, std::string> builds;    // component -> build, where the record has one
  // The catalog the plan was made with (--catalog, STACKBUILD_CATALOG, or the
  // one found for the recipe: Planned::catalog); null without a plan or a
  // catalog. The layers take their records from it.
  std::shared_ptr<const catalog::Catalog> catalog;
  // The record the plan chose for each resolved component (its exact version
  // and build), found once here; they live in `catalog`.
  std::map<std::string, const catalog::Record*> records;
  // --locked: the point's {"apt": ..., "pip": ..., "redist": ..., "source": ...}
  // from the lockfile (JSON text), checked against the recipe; "" = resolve now.
  std::string lock;
};

// The resolved components of `point` (none for an unresolved one) and the
// catalog they were resolved against.
PointInputs point_inputs(const resolve::PlanPoint& point, std::shared_ptr<const catalog::Catalog> catalog);

// The catalog record chosen for `component` at the point (point.records);
// for a component the plan did not resolve (a recipe built without a plan),
// the record whose version or alias is `fallback`. Null when there is none,
// or no catalog.
const catalog::Record* chosen_record(const PointInputs& point, const std::string& component,
                                     const std::string& fallback);

}  // namespace sb
