// Installing a wheel without pip (the binary distribution format, PEP 427 /
// PEP 491): unpack into the image's site-packages, map `.data/` schemes,
// rewrite `#!python` shebangs and `RECORD`, write `INSTALLER` (and
// `REQUESTED` for what the recipe named), generate console scripts from
// `entry_points.txt`. No .pyc files are written: Python makes them at first
// import (or not, in a read-only image), so the layer does not change with
// the time of the build.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fetch/pip/tags.hpp"

namespace sb::pip {

namespace fs = std::filesystem;

struct InstalledWheel {
  std::string name, version;
  std::string dist_info;           // image path of the .dist-info directory
  std::vector<std::string> files;  // image paths written (without the leading '/')
  uint64_t bytes = 0;
};

// Shared by wheels installed at the same time: every file is written beside
// its place and renamed into it here, so that a path two wheels write ends
// with the file of the later wheel (in `order`), as when installed one after
// the other (nvidia/__init__.py is in several nvidia-* wheels).
class PathClaims {
 public:
  void commit(const fs::path& temp, const fs::path& dest, int order);

 private:
  std::mutex mu_;
  std::map<std::string, int> owner_;
};

// Unpacks `wheel` (a zip, e.g. a blob in the store) named `filename` into the
// image tree `root` for `target`. Throws sb::Error for a hostile or broken
// wheel (absolute paths, '..', links, no .dist-info).
InstalledWheel install_wheel(const fs::path& wheel, const std::string& filename, const Target& target,
                             const fs::path& root, bool requested, PathClaims* claims = nullptr, int order = 0);

// The script pip writes for an entry point "module:attr".
std::string console_script(const std::string& interpreter, const std::string& entry);

// "sha256=<urlsafe base64, no padding>" of a hex sha256, as RECORD wants it.
std::string record_hash(const std::string& sha256_hex);

}  // namespace sb::pip
