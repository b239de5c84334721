// Splitting a layer that is over a size budget into several layers, by
// component, deterministically (as apko's layering budget does): the same
// entries and budget always give the same parts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layer/tree.hpp"

namespace sb {

// Names the component an archive path belongs to: a pip distribution, an apt
// package, a redist component, a top-level path.
using GroupFn = std::function<std::string(const std::string& path)>;

// The group of `path` in a copy layer: its first path component ("usr" for
// "usr/lib/x.so"; the path itself at the top).
std::string top_level_group(const std::string& path);

// `entries` as one part when their file content is at most `budget` bytes
// (or budget is 0); else as several parts: entries are grouped by `group_of`
// (a hardlink goes with its target; a directory with the first group below
// it, else its own), the groups taken in sorted order and packed in turn, a
// new part starting when the next group would take the current one over the
// budget. A group larger than the budget is a part of its own. Every part
// holds the directories above its entries (the same entries as the original),
// so each is a valid layer alone.
std::vector<EntryMap> split_entries(const EntryMap& entries, uint64_t budget, const GroupFn& group_of);

}  // namespace sb
