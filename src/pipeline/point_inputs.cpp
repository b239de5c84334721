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
  return in;
}

const catalog::Record* chosen_record(const PointInputs& point, const std::string& component,
                                     const std::string& fallback) {
  const catalog::Component* c = point.catalog ? point.catalog->find(component) : nullptr;
  if (!c) return nullptr;
  if (auto v = point.versions.find(component); v != point.versions.end()) {
    auto b = point.builds.find(component);
    for (const auto& r : c->records)
      if (r.version.str() == v->second && (b == point.builds.end() || r.build == b->second)) return &r;
  }
  for (const auto& r : c->records)
    if (r.version.str() == fallback ||
        std::find(r.aliases.begin(), r.aliases.end(), fallback) != r.aliases.end())
      return &r;
  return nullptr;
}

}  // namespace sb
