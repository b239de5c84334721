// A lockfile, as a user's hand edit or a bad merge may leave it: the stale
// check against a plan of two points, and the pins a --locked build reads.
#include "fetch/apt/install.hpp"
#include "fetch/apt/sources.hpp"
#include "fuzz.hpp"
#include "fetch/pip/resolver.hpp"
#include "pipeline/lock.hpp"
#include "resolve/lockfile.hpp"

namespace {

sb::resolve::Plan fuzz_plan() {
  using namespace sb::resolve;
  Plan plan;
  plan.recipe = "r.yaml";
  plan.stack = "t";
  for (const char* cuda : {"12.6", "12.8"}) {
    PlanPoint p;
    p.point.values.push_back({"cuda", sb::MatrixValue{{cuda}, false, {}}});
    p.point.values.push_back({"arch", sb::MatrixValue{{"8.0", "9.0"}, true, {}}});
    ResolvedStack s;
    s.versions = {{"cuda", std::string(cuda) + ".1"}, {"cudnn", "9.5.1.17"}};
    s.builds = {{"cudnn", "cuda12"}};
    s.driver_min = "560.28.03";
    s.arch = {"8.0", "9.0"};
    p.stack = s;
    plan.points.push_back(p);
  }
  return plan;
}

}  // namespace

SB_FUZZ_TARGET(lockfile) {
  static const sb::resolve::Plan plan = fuzz_plan();
  const std::string text(sb::fuzz::text(data, size));
  std::vector<std::string> changes;
  bool read = sb::fuzz::expect_errors(
      [&] { changes = sb::resolve::lock_changes(text, "r.yaml.lock", plan); });
  if (read && text == sb::resolve::render_lock(plan))
    sb::fuzz::check(changes.empty(), "the plan's own lockfile reads as changed");
  // The pins of each point, read as the layers read them.
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("points") || !doc["points"].is_array()) return;
  for (const auto& p : doc["points"]) {
    if (!p.is_object()) continue;
    for (const char* kind : {"pip", "apt"}) {
      if (!p.contains(kind) || !p[kind].is_object()) continue;
      for (const auto& item : p[kind].items()) {
        const nlohmann::json& entry =
            item.value();  // not a structured binding: clang 14 lambdas cannot capture one
        if (std::string(kind) == "pip") {
          sb::fuzz::expect_errors([&] {
            for (const auto& w : sb::pinned_list<sb::pip::PinnedWheel>(entry, "wheels"))
              sb::fuzz::check(!w.size || *w.size < (uint64_t{1} << 63),
                              "a negative wheel size was read");
          });
        } else {
          sb::fuzz::expect_errors(
              [&] { (void)sb::pinned_list<sb::apt::LockedPackage>(entry, "packages"); });
          sb::fuzz::expect_errors(
              [&] { (void)sb::pinned_list<sb::apt::Repository>(entry, "repositories"); });
        }
      }
    }
  }
}
