// The entries of an archive or a layer, in canonical form and canonical
// (byte) order: plain values that the sources (apt/, pip/, redist/, source/)
// make and the layer stage writes, below both.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sb {

namespace fs = std::filesystem;

struct TarEntry {
  enum class Type { File, Dir, Symlink, Hardlink, CharDev, BlockDev, Fifo };
  Type type = Type::File;
  uint32_t mode = 0644;  // permission bits, with setuid/setgid/sticky
  uint32_t uid = 0, gid = 0;
  int64_t mtime = 0;
  uint64_t size = 0;  // regular files only
  std::string link;   // symlink target, or hardlink target path in the archive
  fs::path source;    // host file holding the content (regular files)
  uint32_t dev_major = 0, dev_minor = 0;
  std::vector<std::pair<std::string, std::string>> xattrs;  // sorted by name
  uint64_t host_dev = 0, host_ino = 0;  // set for files with several links; not archived
};

// Path in the archive ("usr/bin/x": relative, no "./", no trailing slash) ->
// entry. std::map orders std::string by bytes, which is the canonical order.
using EntryMap = std::map<std::string, TarEntry>;

// How host files become entries.
struct ScanOptions {
  int64_t source_date_epoch = 0;     // mtimes are clamped to it
  std::optional<uint32_t> uid, gid;  // set: every entry gets them; unset: 0
  bool preserve_owner = false;       // keep the host's uid/gid instead
  bool normalize_modes = false;      // 0755 dirs/executables, 0644 the rest
  bool overlay_whiteouts = false;    // 0/0 char devices and overlay opaque xattrs are whiteouts
};

// Adds the parent directories of every entry that lacks one (0755, clamped mtime).
void add_parent_dirs(const ScanOptions& options, EntryMap& out);

// Turns regular files sharing an inode into hardlinks to the first path in
// canonical order. Call after the map is complete.
void link_hardlinks(EntryMap& entries);

// Checks and canonicalises an archive path: strips "./" and "/" at the start
// and a trailing "/", refuses "..", empty and NUL-containing paths.
std::string canonical_archive_path(const std::string& path);

// Names the component an archive path belongs to: a pip distribution, an apt
// package, a redist component, a top-level path.
using GroupFn = std::function<std::string(const std::string& path)>;

// The group of `path` in a copy layer: its first path component ("usr" for
// "usr/lib/x.so"; the path itself at the top).
std::string top_level_group(const std::string& path);

}  // namespace sb
