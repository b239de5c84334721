// The lockfile: every resolved version of every matrix point, as JSON with
// sorted keys and a 2-space indent, so that a change reads well in a diff.
//
//   {
//     "lockfile_version": 1,
//     "points": [
//       {"matrix": {"cuda": "12.6", ...}, "resolved": {"versions": {...}, ...}},
//       {"matrix": {...}, "unsatisfiable": "no cudnn 9.0 version works with cuda 12.6"}
//     ],
//     "recipe": "pytorch.yaml",
//     "stack": "pytorch"
//   }
//
// Later stages add the URL and sha256 of every artifact fetched.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "resolve/plan.hpp"

namespace sb::resolve {

constexpr int kLockfileVersion = 1;

// <recipe>.lock beside the recipe: recipes/pytorch.yaml -> recipes/pytorch.yaml.lock
std::filesystem::path lock_path(const std::filesystem::path& recipe);

// The lockfile's text for `plan` (ends in a newline).
std::string render_lock(const Plan& plan);
// The same with what later stages pin for each point merged into its object:
// `extras[i]` (an object, e.g. {"apt": {...}} with every package's version,
// URL and sha256) goes into point i. Missing or null entries add nothing.
std::string render_lock(const Plan& plan, const std::vector<nlohmann::json>& extras);

// The `field` object a lockfile holds for `point` (null when absent), e.g. the
// "apt" packages a --locked build fetches exactly.
nlohmann::json locked_field(const std::string& lock_text, const Point& point, const std::string& field);

// The object a parsed lockfile holds for `point` (null when there is none), by
// reference: errors about what it holds carry its JSON pointer in the file.
const nlohmann::json* locked_point(const nlohmann::json& lock, const Point& point);

// What differs between a lockfile's text and `plan`, one line a change:
//   "point cuda=12.6 pytorch=2.6: cudnn 9.5.1.17 -> 9.6.0.74"
//   "point cuda=12.8: not in the lock (new in the matrix)"
// Empty when the lock is current. Throws InputError at `lock_file` when the
// text is not a lockfile.
std::vector<std::string> lock_changes(const std::string& lock_text, const std::string& lock_file, const Plan& plan);

// What the pins of two lockfiles differ in, for a person to review before
// the new one is written, one line a change:
//   "point cuda=12.6: cudnn 9.5.1.17 -> 9.6.0.74"            (resolved versions)
//   "point cuda=12.6: pip tools: numpy 2.3.1 -> 2.3.2"       (a layer's pins)
//   "point cuda=12.6: pip tools: + rich 14.0.0", "... - foo 1.0"
//   "point cuda=12.6: base sha256:1234... -> sha256:abcd..."
//   "point cuda=12.8: new", "point cuda=12.4: removed"
// A pin is a package (apt), wheel (pip) or archive (redist) by name and
// version; a section without such lists (source, base) changes as a whole.
// Empty when they pin the same. `before` may be "" (no lockfile yet).
std::vector<std::string> lock_diff(const std::string& before, const std::string& after);

}  // namespace sb::resolve
