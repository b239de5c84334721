// The steps of load_recipe(), internal to recipe/: read one file, merge a
// child into its parent, validate the result.
#pragma once

#include <string>

#include "recipe/recipe.hpp"

namespace sb::detail {

struct RecipeFile {
  Recipe recipe;            // only what this file says; key_where tells which keys it gave
  std::string extends;      // the parent's path as written, "" = none
  SourceLocation extends_where;
};

// Types and keys of one file, on their own (no cross-file checks).
RecipeFile parse_recipe_file(const std::string& text, const fs::path& file);

// `child` over `base`: child keys win; layers and tests merge by name, a
// child layer's keys over the parent layer's (patches add up; `replace:
// true` drops the parent's); config env, labels and annotations by key;
// matrix axes by key.
void merge_recipe(Recipe& base, const Recipe& child);

// What only the merged recipe can show: required keys, what each layer may
// combine, matrix include/exclude keys.
void validate_recipe(const Recipe& recipe);

bool is_compute_capability(const std::string& s);  // "8.0", "9.0a", "8.6+PTX"

}  // namespace sb::detail
