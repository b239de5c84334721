// The same shared library in two layers of one image, e.g. libcublas.so.12
// from the CUDA layer and again from a torch wheel's nvidia-cublas-cu12:
// found by soname (the file name a loader asks for), reported, and, when the
// recipe says the lower copy wins, the upper copy replaced by a symlink to it
// (so RPATH lookups of the wheel still succeed and the bytes are stored once).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "layer/tree.hpp"
#include "pip/tags.hpp"

namespace sb::pip {

struct LayerListing {
  std::string layer;                // the layer's name
  std::vector<std::string> paths;   // image paths (no leading '/') of files and symlinks
  std::string musl_version;         // "1.2" when the layer's lib/apk/db/installed lists musl
};

// The image's C library, told by the layers below: the musl loader
// lib/ld-musl-<machine>.so.1 in one of them makes `target` musl, at the
// version Alpine's package database (lib/apk/db/installed) gives, else "1.1"
// (the oldest musllinux tag, which every musl runs). Returns whether it did.
bool detect_musl(const std::vector<LayerListing>& lower, Target& target);

// "P:musl\nV:1.2.5-r0\n" (apk's installed database) -> "1.2"; "" when musl is not listed.
std::string musl_version_from_apk(const std::string& installed);

struct DuplicateLibrary {
  std::string soname;               // libcublas.so.12
  std::string lower_layer, lower_path;
  std::string upper_layer, upper_path;  // the regular file in the upper layer
  uint64_t upper_bytes = 0;
};

enum class DuplicatePolicy { Report, KeepLower };
DuplicatePolicy parse_duplicate_policy(const std::string& text);  // "report" (default), "lower"

// Whether a file name looks like a shared library: libX.so or libX.so.N[.M...].
bool is_library_name(const std::string& name);

// The paths of a layer blob (tar, gzip or zstd), for layers built earlier.
LayerListing list_layer(const std::string& name, const fs::path& blob);
LayerListing list_entries(const std::string& name, const EntryMap& entries);

// Libraries that `upper` (entries about to become a layer) ships as regular
// files while a lower layer already has the soname.
std::vector<DuplicateLibrary> find_duplicate_libraries(const std::vector<LayerListing>& lower,
                                                       const std::string& upper_name, const EntryMap& upper);

// KeepLower: replaces each duplicate's upper file by a symlink to the lower
// path. Returns the bytes saved.
uint64_t keep_lower(EntryMap& upper, const std::vector<DuplicateLibrary>& dups);

}  // namespace sb::pip
