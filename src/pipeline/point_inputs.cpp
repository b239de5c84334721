#include "pipeline/point_inputs.hpp"

#include <algorithm>

namespace sb {

PointInputs point_inputs(const resolve::PlanPoint& point, std::shared_ptr<const catalog::Catalog> catalog) {
  PointInputs in;
  if (point.stack) {
    in.versions = point.stack->versions;
    in.builds = point.stack->builds;
  }
  in.catalog = std::move(catalog);
  for (const auto& [component, version] : in.versions) {
    const catalog::Component* c = in.catalog ? in.catalog->find(component) : nullptr;
    if (!c) continue;
    auto b = in.builds.find(component);
    for (const auto& r : c->records)
      if (r.version.str() == version && (b == in.builds.end() || r.build == b->second)) {
        in.records[component] = &r;
        break;
      }
  }
  return in;
}

const catalog::Record* chosen_record(const PointInputs& point, const std::string& component,
                                     const std::string& fallback) {
  if (auto it = point.records.find(component); it != point.records.end()) return it->second;
  const catalog::Component* c = point.catalog ? point.catalog->find(component) : nullptr;
  if (!c) return nullptr;
  for (const auto& r : c->records)
    if (r.version.str() == fallback ||
        std::find(r.aliases.begin(), r.aliases.end(), fallback) != r.aliases.end())
      return &r;
  return nullptr;
}

}  // namespace sb
