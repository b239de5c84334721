// The steps of load_recipe(), internal to recipe/: read one file, merge a
// child into its parent, validate the result.
#pragma once

#include <string>

#include "recipe/recipe.hpp"
#include "util/yaml_reader.hpp"

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

// The apt keys (recipe_apt.cpp): `repositories:` items (keyrings relative to
// `base`), `pins:` items, and a layer's `priority:`.
std::vector<AptRepositorySpec> parse_apt_repositories(const yaml::Reader& r, const YAML::Node& n, const fs::path& base);
std::vector<AptPin> parse_apt_pins(const yaml::Reader& r, const YAML::Node& n);
std::string parse_apt_priority(const yaml::Reader& r, const YAML::Node& n);
// Whether a layer installs Debian packages (apt:, use: X + from: apt, or use: os/debian/ubuntu).
bool is_apt_spec(const LayerSpec& l);
// The apt keys only apt layers may have; keyrings that must exist.
void validate_apt_keys(const Recipe& r);

bool is_compute_capability(const std::string& s);  // "8.0", "9.0a", "8.6+PTX"

}  // namespace sb::detail
