#include "pipeline/labels.hpp"

#include "verify/image_tests.hpp"

namespace sb {

std::map<std::string, std::string> stack_labels(const Recipe& recipe, const resolve::ResolvedStack* stack) {
  std::map<std::string, std::string> out;
  std::vector<std::string> components;
  if (stack) {
    std::string arch;
    for (const auto& a : stack->arch) arch += (arch.empty() ? "" : ",") + a;
    if (!arch.empty()) out["dev.stackbuild.arch"] = arch;
    for (const auto& [c, v] : stack->versions) {
      out["dev.stackbuild.version." + c] = v;
      components.push_back(c);
    }
    if (!stack->driver_min.empty()) out["dev.stackbuild.driver_min"] = stack->driver_min;
  }
  std::string tests = verify::tests_label(recipe, components);
  if (!tests.empty()) out[verify::kTestsLabel] = tests;
  return out;
}

std::vector<std::string> merge_labels(std::map<std::string, std::string>& labels,
                                      const std::map<std::string, std::string>& computed) {
  std::vector<std::string> warnings;
  for (const auto& [k, v] : computed) {
    auto it = labels.find(k);
    if (it != labels.end() && it->second != v)
      warnings.push_back("label " + k + ": the recipe's '" + it->second + "' is replaced by the resolved '" + v + "'");
    labels[k] = v;
  }
  return warnings;
}

}  // namespace sb
