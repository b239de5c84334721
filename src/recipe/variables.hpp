// `${name}` references in recipe strings. A reference is `${` NAME `}` with
// NAME made of letters, digits, '_' and '-'; `$${` writes a literal `${`
// (for shell code), and a `$` before anything else is kept as is, so `$HOME`
// reaches the shell untouched.
//
// Which names exist is known only with the matrix and the resolved stack
// (resolve/): matrix keys, resolved components (${cuda} is the chosen CUDA
// version), `arch` (the point's compute capabilities, joined by ';'), `stack`
// and `release`.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "recipe/recipe.hpp"

namespace sb {

// The names `text` refers to, in order. Throws InputError at `where` when a
// reference is malformed (unterminated, empty, bad characters).
std::vector<std::string> variable_names(const std::string& text, const SourceLocation& where);

// One reference in a recipe, and whether it sits in a version (where only
// matrix values can be used: versions are what the resolver is given).
struct VariableUse {
  std::string name;
  SourceLocation where;
  bool in_version = false;
};
std::vector<VariableUse> variable_uses(const Recipe& recipe);

// Replaces every reference by lookup(name). A name lookup() does not know is
// an InputError at t.where: "undefined variable '${x}'", with a did-you-mean
// from `known` and `context` (e.g. "at point cuda=12.6") in the message.
using VariableLookup = std::function<std::optional<std::string>(const std::string&)>;
std::string expand_variables(const Text& t, const VariableLookup& lookup, const std::vector<std::string>& known,
                             const std::string& context = {});

}  // namespace sb
