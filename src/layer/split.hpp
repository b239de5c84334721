// Splitting a layer that is over a size budget into several layers, by
// component, deterministically (as apko's layering budget does): the same
// entries and budget always give the same parts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "layer/tree.hpp"

namespace sb {

// The path an OCI whiteout hides ("a/.wh.b" -> "a/b"); "" when `path` is
// not a whiteout (an opaque marker is not).
std::string whiteout_target(const std::string& path);

// The directory an opaque marker empties ("a/.wh..wh..opq" -> "a", "." at
// the top); "" when `path` is not one.
std::string opaque_dir(const std::string& path);

// Groups by owner: the component `owner` maps a path to (the package or
// archive that put it there), else `unowned(path)`.
GroupFn group_by_owner(std::map<std::string, std::string> owner, GroupFn unowned);

// `entries` as one part when their file content is at most `budget` bytes
// (or budget is 0); else as several parts: entries are grouped by `group_of`
// (a hardlink goes with its target; a whiteout with the path it hides; a
// directory with the first group below it, else its own), the groups taken in
// sorted order and packed in turn, a new part starting when the next group
// would take the current one over the budget. A group larger than the budget
// is a part of its own. Groups that whiteouts tie together are one: a
// whiteout's and those of what it hides in this layer, an opaque marker's and
// those of everything under its directory (named by the smallest), so no part
// hides what an earlier part holds and the parts stacked give the layer's
// tree. Every part holds the directories above its entries (the same entries
// as the original), so each is a valid layer alone. `groups`, when given,
// receives the groups of each part (one empty list when not split).
std::vector<EntryMap> split_entries(const EntryMap& entries, uint64_t budget, const GroupFn& group_of,
                                    std::vector<std::vector<std::string>>* groups = nullptr);

}  // namespace sb
