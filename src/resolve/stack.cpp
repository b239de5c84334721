// ResolvedStack from a solved search: versions, driver floors and the
// NVIDIA_REQUIRE_CUDA string; and the JSON forms of the resolver's types.
#include "resolve/solver.hpp"

namespace sb::resolve {

namespace detail {

namespace {

using catalog::Version;

// The larger of two driver versions; "" counts as none.
void raise(std::string& floor, const std::string& candidate) {
  if (candidate.empty()) return;
  auto c = Version::parse(candidate);
  auto f = Version::parse(floor);
  if (c && (!f || *c > *f)) floor = candidate;
}

// "cuda>=12.8 brand=tesla,driver>=470,driver<471 brand=unknown,..." as in
// NVIDIA's CUDA images: one entry per driver branch and brand.
std::string require_cuda(const catalog::Component& cuda, const catalog::Record& r) {
  const Version& v = r.version;
  std::string s = "cuda>=" + std::to_string(v.part(0)) + "." + std::to_string(v.part(1));
  for (const auto& branch : r.driver_branches) {
    auto b = Version::parse(branch);
    if (!b) continue;
    std::string next = std::to_string(b->part(0) + 1);
    for (const auto& brand : cuda.require_brands)
      s += " brand=" + brand + ",driver>=" + branch + ",driver<" + next;
  }
  return s;
}

}  // namespace

ResolvedStack make_stack(const Solver& solver) {
  ResolvedStack stack;
  stack.arch = solver.request.arch;
  for (size_t c = 0; c < solver.slots.size(); ++c) {
    const catalog::Record* r = solver.slots[c].chosen;
    if (!r) continue;
    const catalog::Component& comp = solver.catalog.components[c];
    stack.versions[comp.name] = r->version.str();
    if (!r->build.empty()) stack.builds[comp.name] = r->build;
    raise(stack.driver_min, r->driver_min);
    // Under minor version compatibility a CUDA release runs on its major's floor.
    std::string compat = r->driver_min;
    for (const auto& mc : comp.minor_compat)
      if (mc.versions.contains(r->version)) compat = mc.driver_min;
    raise(stack.driver_min_compat, compat);
    if (comp.name == "cuda") stack.nvidia_require_cuda = require_cuda(comp, *r);
  }
  return stack;
}

}  // namespace detail

std::string Conflict::str() const {
  std::string s = summary;
  for (const auto& r : reasons) s += "\n  " + r;
  return s;
}

void to_json(nlohmann::json& j, const ResolvedStack& s) {
  j = {{"versions", s.versions},
       {"builds", s.builds},
       {"driver_min", s.driver_min},
       {"driver_min_compat", s.driver_min_compat},
       {"nvidia_require_cuda", s.nvidia_require_cuda},
       {"arch", s.arch}};
}

void from_json(const nlohmann::json& j, ResolvedStack& s) {
  j.at("versions").get_to(s.versions);
  s.builds = j.value("builds", std::map<std::string, std::string>{});
  j.at("driver_min").get_to(s.driver_min);
  s.driver_min_compat = j.value("driver_min_compat", std::string{});
  j.at("nvidia_require_cuda").get_to(s.nvidia_require_cuda);
  j.at("arch").get_to(s.arch);
}

void to_json(nlohmann::json& j, const Conflict& c) {
  j = {{"summary", c.summary}, {"reasons", c.reasons}};
}

}  // namespace sb::resolve
