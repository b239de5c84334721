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
//   - is a device node and devices were not allowed;
//   - would take the unpacked size or entry count past the limits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "util/digest.hpp"

namespace sb {

namespace fs = std::filesystem;

struct ExtractOptions {
  bool allow_devices = false;
  bool preserve_owner = false;          // chown entries (only as root)
  uint64_t max_bytes = 64ull << 30;     // total unpacked content, all layers
  uint64_t max_entries = 10'000'000;
};

struct ExtractStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

// Applies one layer (tar, tar+gzip or tar+zstd, detected) onto `target`,
// which must exist. Throws sb::Error naming the layer entry at fault.
void extract_layer(const fs::path& blob, const fs::path& target, const ExtractOptions& options,
                   ExtractStats& stats);

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
