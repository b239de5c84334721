// Internal to pipeline/: the host files a recipe may read. A recipe is
// trusted for what it names inside its own tree, not for the rest of the
// host (docs/security.md: a forked recipe must not copy
// ~/.docker/config.json into an image, nor build or patch from it).
#pragma once

#include <filesystem>
#include <string>

#include "util/error.hpp"

namespace sb {

namespace fs = std::filesystem;

// Where a recipe's files may be: the top of the git repository its
// directory `recipe_dir` is in (the nearest directory above with a .git),
// else that directory. Resolved (no symlinks). `repository` says which.
fs::path recipe_confinement(const fs::path& recipe_dir, bool& repository);

// Throws InputError at `where` unless `path`, every symlink on its way and at
// its end resolved, is inside recipe_confinement(recipe_dir). `as_written`
// and `what` ("copy source", "source.path", "patch") name it; `verb` says
// what the recipe does with it ("copies", "builds from", "applies").
void check_recipe_path(const fs::path& recipe_dir, const fs::path& path, const std::string& as_written,
                       const SourceLocation& where, const std::string& what, const std::string& verb);

}  // namespace sb
