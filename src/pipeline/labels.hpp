// The labels stackbuild writes into an image config, beside the recipe's:
//   dev.stackbuild.arch               the point's compute capabilities, comma-separated ("8.0,9.0")
//   dev.stackbuild.version.<name>     the resolved version of every component
//   dev.stackbuild.driver_min         the minimum driver the resolver computed
//   dev.stackbuild.tests              the recipe's tests and the built-in ones switched on
//                                     (verify/image_tests.hpp), so `stackbuild test LAYOUT` runs them
// `stackbuild test` and `stackbuild run --gpus` read them back. They win over a
// recipe label of the same key: the checks must see what was resolved.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "recipe/recipe.hpp"
#include "resolve/resolve.hpp"

namespace sb {

// `recipe`: instantiated at its point; `stack`: the point's resolution, or
// null for a recipe without catalog components.
std::map<std::string, std::string> stack_labels(const Recipe& recipe, const resolve::ResolvedStack* stack);

// Adds `computed` to `labels` (computed wins); returns a warning for each
// recipe label it replaced with another value.
std::vector<std::string> merge_labels(std::map<std::string, std::string>& labels,
                                      const std::map<std::string, std::string>& computed);

}  // namespace sb
