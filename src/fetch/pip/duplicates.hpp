// What a pip layer reads of the layers below it: their paths (the Python
// projects they installed) and their C library (musl or glibc). Libraries
// that two layers both hold: pipeline/duplicate_libraries.hpp.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "archive/entry.hpp"
#include "fetch/pip/tags.hpp"

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

// The paths of a layer blob (tar, gzip or zstd), for layers built earlier.
LayerListing list_layer(const std::string& name, const fs::path& blob);

}  // namespace sb::pip
