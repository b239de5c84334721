// Recipes: the YAML a user forks and edits by hand.
#include <nlohmann/json.hpp>

#include "fuzz.hpp"
#include "recipe/recipe.hpp"
#include "recipe/variables.hpp"

SB_FUZZ_TARGET(recipe) {
  std::string text(sb::fuzz::text(data, size));
  sb::fuzz::expect_errors([&] {
    // `extends:` is read relative to the recipe: a directory that is not there.
    sb::Recipe r = sb::parse_recipe(text, "/nonexistent-fuzz-dir/recipe.yaml");
    nlohmann::json j = r;
    (void)j.dump();
    (void)sb::variable_uses(r);
  });
}
