// Images unpacked for verification, cached in the store by manifest digest
// (<store>/roots/<hex>): unpacked once with the safe extractor into a
// temporary directory and renamed into place, so a half-unpacked root is
// never reused.
//
// The cache is bounded: after unpacking a new root, only the `keep` most
// recently used stay (a reuse touches a root's mtime). A process holds a
// shared lock on each root it uses (locks/root-use-<hex>) for as long as it
// uses it; eviction takes that lock exclusively without waiting and skips a
// root in use. `stackbuild gc` removes all of them.
#pragma once

#include <filesystem>
#include <memory>

#include "image/layout.hpp"
#include "store/store.hpp"

namespace sb::verify {

inline constexpr size_t kKeepRoots = 4;

struct UnpackedRoot {
  std::filesystem::path path;
  std::shared_ptr<FileLock> in_use;  // keeps the root from eviction while held
};

UnpackedRoot unpacked_root(const Store& store, const LayoutImage& image, size_t keep = kKeepRoots);

// Removes the roots past the `keep` most recently used ones, but none in use
// and never `except`. Returns how many it removed.
size_t evict_roots(const Store& store, size_t keep, const std::string& except = {});

}  // namespace sb::verify
