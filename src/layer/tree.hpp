// The entries of a layer gathered from a directory tree, a changeset or a
// list of copies (the entries themselves: archive/entry.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "archive/entry.hpp"
#include "build/changeset.hpp"

namespace sb {

namespace fs = std::filesystem;

// Adds everything under `dir` (not `dir` itself) below `prefix` in the archive.
void scan_tree(const fs::path& dir, const std::string& prefix, const ScanOptions& options, EntryMap& out);

// Adds one host path (file, symlink or directory tree) at `dest` in the archive.
void add_path(const fs::path& src, const std::string& dest, const ScanOptions& options, EntryMap& out);

EntryMap entries_from_changeset(const Changeset& changeset, const ScanOptions& options);

}  // namespace sb
