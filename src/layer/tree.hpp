// The entries of a layer, in canonical form and canonical (byte) order,
// gathered from a directory tree, a changeset or a list of copies.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "build/changeset.hpp"

namespace sb {

namespace fs = std::filesystem;

struct TarEntry {
  enum class Type { File, Dir, Symlink, Hardlink, CharDev, BlockDev, Fifo };
  Type type = Type::File;
  uint32_t mode = 0644;       // permission bits, with setuid/setgid/sticky
  uint32_t uid = 0, gid = 0;
  int64_t mtime = 0;
  uint64_t size = 0;          // regular files only
  std::string link;           // symlink target, or hardlink target path in the archive
  fs::path source;            // host file holding the content (regular files)
  uint32_t dev_major = 0, dev_minor = 0;
  std::vector<std::pair<std::string, std::string>> xattrs;  // sorted by name
  uint64_t host_dev = 0, host_ino = 0;  // set for files with several links; not archived
};

// Path in the archive ("usr/bin/x": relative, no "./", no trailing slash) ->
// entry. std::map orders std::string by bytes, which is the canonical order.
using EntryMap = std::map<std::string, TarEntry>;

// How host files become entries.
struct ScanOptions {
  int64_t source_date_epoch = 0;              // mtimes are clamped to it
  std::optional<uint32_t> uid, gid;           // set: every entry gets them; unset: 0
  bool preserve_owner = false;                // keep the host's uid/gid instead
  bool normalize_modes = false;               // 0755 dirs/executables, 0644 the rest
  bool overlay_whiteouts = false;             // 0/0 char devices and overlay opaque xattrs are whiteouts
};

// Adds everything under `dir` (not `dir` itself) below `prefix` in the archive.
void scan_tree(const fs::path& dir, const std::string& prefix, const ScanOptions& options, EntryMap& out);

// Adds one host path (file, symlink or directory tree) at `dest` in the archive.
void add_path(const fs::path& src, const std::string& dest, const ScanOptions& options, EntryMap& out);

// Adds the parent directories of every entry that lacks one (0755, clamped mtime).
void add_parent_dirs(const ScanOptions& options, EntryMap& out);

EntryMap entries_from_changeset(const Changeset& changeset, const ScanOptions& options);

// Turns regular files sharing an inode into hardlinks to the first path in
// canonical order. Call after the map is complete.
void link_hardlinks(EntryMap& entries);

// Checks and canonicalises an archive path: strips "./" and "/" at the start
// and a trailing "/", refuses "..", empty and NUL-containing paths.
std::string canonical_archive_path(const std::string& path);

}  // namespace sb
