// The safe extractor: applies layer blobs, in order, onto a directory.
//
// Whiteouts (`.wh.NAME`) and opaque markers (`.wh..wh..opq`) remove what lower
// layers put there. Every path is resolved inside the target the way the image
// will see it (absolute symlinks are relative to the image root), and an entry
// is refused, with nothing written outside the target, when it:
//   - is absolute or has a `..` component, or is empty;
//   - would go through a symlink that leads out of the root (write, link, chmod);
//   - is a hardlink to a path outside the root or to nothing;
//   - is a whiteout of `..`, `.` or nothing (a bare `.wh.`);
//   - appears twice in one layer;
//   - is a device node and devices were neither allowed nor skipped;
//   - would take the unpacked size or entry count past the limits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "util/digest.hpp"

namespace sb {

namespace fs = std::filesystem;

// What lands on disk besides the tree: regular files' xattrs in the user.*
// namespace, except user.overlay.* (overlayfs' markers), and
// security.capability only with `preserve_owner`; never trusted.* (which
// holds overlayfs' privileged markers), other security.* or system.*.
// Without `preserve_owner`, files lose their setuid and setgid bits (the
// unpacker owns them).
struct ExtractOptions {
  bool allow_devices = false;
  bool skip_devices =
      false;  // device nodes are left out, silently (cached roots: the sandbox has its own /dev)
  bool preserve_owner =
      false;  // chown entries (only as root); keeps setuid/setgid bits and file capabilities
  uint64_t max_bytes = 64ull << 30;  // total unpacked content, all layers
  uint64_t max_entries = 10'000'000;
  // Layers extract_layers() inflates ahead of the one it extracts, each on a
  // thread of its own: -1 for one per usable core past two (the current
  // layer's inflating and its extraction take those two), at most 4.
  int layers_ahead = -1;
};

struct ExtractStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

// Applies one layer (tar, tar+gzip or tar+zstd, detected) onto `target`,
// which must exist. Throws sb::Error naming the layer entry at fault.
void extract_layer(const fs::path& blob, const fs::path& target, const ExtractOptions& options,
                   ExtractStats& stats);

// Applies `blobs` in order onto `target`, as extract_layer one after another
// would, and inflates the next gzip layers ahead meanwhile (`layers_ahead`;
// what they hold inflated is bounded, all together, by an eighth of the
// memory left, at most 1 GiB): then a layer of many small files, whose cost
// is creating them, is extracted while a spare core inflates the large layer
// after it. On 2 cores none is inflated ahead: there the cores are busy
// already and it measured slower (the extra buffers' page faults). When
// layer i fails, `on_error(i)` runs before its error is thrown (it may throw
// one of its own instead).
void extract_layers(const std::vector<fs::path>& blobs, const fs::path& target,
                    const ExtractOptions& options, ExtractStats& stats,
                    const std::function<void(size_t)>& on_error = {});

// Archives that are not layers (NVIDIA's redist tarballs, source tarballs and
// zips) go through the same extractor, more strictly: paths resolve inside
// the target and never through a symlink (an entry whose path goes through
// one is refused); a directory entry over a link or file made before is
// refused; a hardlink's target is a regular file inside; a `.wh.` name,
// devices and fifos are refused; no owners, times, xattrs or setuid, setgid
// or sticky bits are applied.
struct ArchiveOptions {
  std::string label;  // the archive's name, for errors
  // Where an entry goes below the target, given its path as archived
  // ('.' components dropped, '..' and absolute paths already refused); ""
  // skips it. Hardlink targets are mapped the same way. Unset: as archived.
  std::function<std::string(const std::string&)> map;
  bool strip_single_top =
      false;  // drop the one top directory all entries are under, if there is one
  bool normalize_modes = false;  // 0755 for directories and files with an x bit, else 0644
  bool copy_hardlinks = false;   // a hardlink becomes a copy of its target
  // Not empty: every symlink is relative and leads to this path or below it
  // (as its path resolves when made, through the links there then; a ".."
  // past a name not there yet is refused, so that no link made later can
  // move where it leads).
  std::string links_inside;
  uint64_t max_bytes = 64ull << 30;
  uint64_t max_entries = 10'000'000;
};

// Unpacks a tar (any compression libarchive reads) or zip into `target`
// (created if missing). Returns the paths below `target` of the entries
// written, in order. Throws sb::Error naming the archive and the entry.
std::vector<std::string> extract_archive(const fs::path& file, const fs::path& target,
                                         const ArchiveOptions& options);

// Writes the uncompressed tar inside a (possibly compressed) layer blob to `out`.
void decompress_layer(const fs::path& blob, const fs::path& out);

// The diff_id of a layer blob (the sha256 of the tar inside it) and the tar's
// size, read through once; for blobs whose diff_id was only said, not seen.
struct UncompressedDigest {
  Digest diff_id;
  uint64_t size = 0;
};
UncompressedDigest uncompressed_digest(const fs::path& blob);

}  // namespace sb
