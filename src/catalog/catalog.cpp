#include "catalog/catalog.hpp"

#include <algorithm>

namespace sb::catalog {

std::string Record::label() const {
  std::string s = component + " " + version.str();
  if (!build.empty()) s += " (" + build + ")";
  return s;
}

int Catalog::index_of(std::string_view component) const {
  auto it = std::lower_bound(components.begin(), components.end(), component,
                             [](const Component& c, std::string_view n) { return c.name < n; });
  if (it == components.end() || it->name != component) return -1;
  return static_cast<int>(it - components.begin());
}

const Component* Catalog::find(std::string_view component) const {
  int i = index_of(component);
  return i < 0 ? nullptr : &components[i];
}

const Record* Catalog::find(std::string_view component, std::string_view version,
                            std::string_view build) const {
  const Component* c = find(component);
  if (!c) return nullptr;
  for (const auto& r : c->records)
    if (r.version.str() == version && r.build == build) return &r;
  return nullptr;
}

int Catalog::arch_index(std::string_view arch) const {
  for (size_t i = 0; i < arch_names.size(); ++i)
    if (arch_names[i] == arch) return static_cast<int>(i);
  return -1;
}

std::vector<std::string> Catalog::component_names() const {
  std::vector<std::string> names;
  for (const auto& c : components) names.push_back(c.name);
  return names;
}

// JSON: the catalog as `stackbuild catalog --json` or a lockfile would show it.
// Keys are sorted (nlohmann::json objects are std::map), so output is stable.

void to_json(nlohmann::json& j, const Requirement& r) {
  j = {{"component", r.component}, {"range", r.range.str()}, {"where", r.where.str()}};
}

void to_json(nlohmann::json& j, const Sources& s) {
  j = nlohmann::json::object();
  if (!s.apt.empty()) j["apt"] = s.apt;
  if (!s.pip.empty()) j["pip"] = s.pip;
  if (s.redist)
    j["redist"] = {{"product", s.redist->product},
                   {"manifest_version", s.redist->manifest_version},
                   {"components", s.redist->components}};
  if (s.redist && !s.redist->archive.empty()) j["redist"]["archive"] = s.redist->archive;
  if (s.git) j["git"] = {{"url", s.git->url}, {"ref", s.git->ref}};
  if (s.archive) j["archive"] = {{"url", s.archive->url}, {"sha256", s.archive->sha256}};
  if (s.debian) {
    j["debian"] = {{"name", s.debian->name}};
    if (!s.debian->suite.empty()) j["debian"]["suite"] = s.debian->suite;
  }
}

void to_json(nlohmann::json& j, const Record& r) {
  j = {{"component", r.component}, {"version", r.version.str()}, {"where", r.where.str()}};
  if (!r.build.empty()) j["build"] = r.build;
  if (!r.aliases.empty()) j["aliases"] = r.aliases;
  if (!r.requirements.empty()) {
    nlohmann::json req = nlohmann::json::object();
    for (const auto& q : r.requirements) req[q.component] = q.range.str();
    j["requires"] = req;
  }
  if (!r.prefers.empty()) {
    nlohmann::json pref = nlohmann::json::object();
    for (const auto& [name, range] : r.prefers) pref[name] = range.str();
    j["prefers"] = pref;
  }
  if (!r.driver_min.empty()) j["driver_min"] = r.driver_min;
  if (!r.driver_branches.empty()) j["driver_branches"] = r.driver_branches;
  if (!r.compute_capability.empty()) j["compute_capability"] = r.compute_capability;
  j["sources"] = r.sources;
  if (!r.info.empty()) j["info"] = r.info;
  if (!r.notes.empty()) j["notes"] = r.notes;
  if (r.explicit_only) j["explicit"] = true;
  if (!r.cite.empty()) j["cite"] = r.cite;
}

void to_json(nlohmann::json& j, const Component& c) {
  j = {{"name", c.name},
       {"description", c.description},
       {"priority", c.priority},
       {"records", c.records}};
  if (!c.arch_support.empty()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& s : c.arch_support)
      a.push_back({{"arch", s.arch}, {"versions", s.versions.str()}, {"cite", s.cite}});
    j["arch_support"] = a;
  }
  if (!c.minor_compat.empty()) {
    nlohmann::json m = nlohmann::json::array();
    for (const auto& mc : c.minor_compat)
      m.push_back({{"versions", mc.versions.str()},
                   {"driver_min", mc.driver_min},
                   {"driver_below", mc.driver_below},
                   {"cite", mc.cite}});
    j["minor_compat"] = m;
  }
  if (!c.require_brands.empty()) j["nvidia_require_brands"] = c.require_brands;
}

void to_json(nlohmann::json& j, const Catalog& c) {
  j = nlohmann::json::object();
  for (const auto& comp : c.components) j[comp.name] = comp;
}

}  // namespace sb::catalog
