// Images unpacked for verification, cached in the store by manifest digest
// (<store>/roots/<hex>): unpacked once with the safe extractor into a
// temporary directory and renamed into place, so a half-unpacked root is
// never reused.
//
// The cache is bounded: after unpacking a new root, only the `keep` most
// recently used stay (a reuse touches a root's mtime), and of those only as
// many, newest first, as fit in `max_bytes` together (the new root always
// stays): the main PyTorch images unpack to 5.5 and 6.7 GB. A process holds a
// shared lock on each root it uses (locks/root-use-<hex>) for as long as it
// uses it; eviction takes that lock exclusively without waiting and skips a
// root in use. `stackbuild gc` removes all of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "image/layout.hpp"
#include "store/store.hpp"

namespace sb::verify {

inline constexpr size_t kKeepRoots = 4;
inline constexpr uint64_t kKeepRootBytes = uint64_t{20} << 30;

// The byte bound of the kept roots: STACKBUILD_ROOTS_MAX_SIZE ("16G", "500MiB"),
// else kKeepRootBytes. Throws naming the setting when it is malformed.
uint64_t keep_root_bytes();

struct UnpackedRoot {
  std::filesystem::path path;
  std::shared_ptr<FileLock> in_use;  // keeps the root from eviction while held
};

UnpackedRoot unpacked_root(const Store& store, const LayoutImage& image, size_t keep = kKeepRoots);

// Removes the roots past the `keep` most recently used ones, and those past
// `max_bytes` of unpacked files counted newest first, but none in use and
// never `except`. A root's size is recorded when it is unpacked
// (roots/.size-<hex>); one without the record counts as 0. Returns how many
// it removed.
size_t evict_roots(const Store& store, size_t keep, const std::string& except = {},
                   uint64_t max_bytes = UINT64_MAX);

}  // namespace sb::verify
