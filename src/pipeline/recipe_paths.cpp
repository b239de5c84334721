#include "pipeline/recipe_paths.hpp"

namespace sb {

fs::path recipe_confinement(const fs::path& recipe_dir, bool& repository) {
  std::error_code ec;
  const fs::path given = recipe_dir.empty() ? fs::path(".") : recipe_dir;  // a recipe named without a directory
  fs::path dir = fs::weakly_canonical(fs::absolute(given), ec);
  if (ec) dir = fs::absolute(given).lexically_normal();
  for (fs::path p = dir;; p = p.parent_path()) {
    if (fs::exists(fs::symlink_status(p / ".git", ec))) {
      repository = true;
      return p;
    }
    if (p == p.parent_path()) break;
  }
  repository = false;
  return dir;
}

void check_recipe_path(const fs::path& recipe_dir, const fs::path& path, const std::string& as_written,
                       const SourceLocation& where, const std::string& what, const std::string& verb) {
  bool repository = false;
  fs::path top = recipe_confinement(recipe_dir, repository);
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  if (ec)
    throw InputError(where, what + " '" + as_written + "' cannot be resolved (" + ec.message() + ")",
                     "a recipe's " + what + " is resolved, symlinks and all, to check it is the recipe's own");
  fs::path rel = real.lexically_relative(top);
  if (!rel.empty() && *rel.begin() != "..") return;
  throw InputError(where,
                   what + " '" + as_written + "' is " + real.string() + ", outside the recipe's " +
                       (repository ? "repository " : "directory ") + top.string(),
                   "a recipe " + verb + " only its own files (a symlink out of them counts as out); to use host "
                   "files on purpose, pass --allow-host-paths to `stackbuild build`");
}

}  // namespace sb
