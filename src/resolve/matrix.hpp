// Matrix expansion: a recipe's `matrix:` -> the list of points to resolve.
//
// The points are the product of the axes in recipe order (the first key
// varies slowest), less every point an `exclude:` entry matches (all of its
// keys equal), then each `include:` entry: its keys fixed, the axes it does
// not name ranging over all their values, points already listed skipped.
// Excludes do not apply to includes. The order is stable: the same recipe
// gives the same list.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "recipe/recipe.hpp"

namespace sb::resolve {

struct Point {
  std::vector<std::pair<std::string, MatrixValue>> values;  // axis order, then include-only keys

  const MatrixValue* get(const std::string& key) const;
  std::string id() const;  // "cuda=12.6 pytorch=2.6 arch=8.0;9.0"; "(no matrix)" when empty
  // id() less `key`: points whose ids without "platform" are equal differ
  // only in platform (they may share a tag: one image index over them).
  std::string id_without(const std::string& key) const;
};

// `--set key=value`: replaces matrix.<key> with the one value (for arch a
// list: "8.0,9.0" or "8.0;9.0"). Includes that name another value of the key
// are dropped. A key not in the matrix is added when it is in `new_keys`
// (catalog components, arch), else it is a usage error with a did-you-mean.
struct Override {
  std::string key, value;
};
Override parse_override(const std::string& arg);  // "key=value"; throws a usage Error
void apply_overrides(Matrix& matrix, const std::vector<Override>& sets, const std::vector<std::string>& new_keys);

std::vector<Point> expand_matrix(const Matrix& matrix);

}  // namespace sb::resolve
