#include "pipeline/build_options.hpp"

namespace sb {

uint64_t layer_budget(const Recipe& recipe, const BuildOptions& options) {
  if (options.layer_budget) return *options.layer_budget;
  return recipe.layer_budget.value_or(kDefaultLayerBudget);
}

}  // namespace sb
