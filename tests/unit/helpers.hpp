// Small helpers shared by the unit tests: scratch trees and files.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "util/file.hpp"

namespace sb::test {

inline void write(const fs::path& p, const std::string& data, int mode = 0644) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << data;
  ::chmod(p.c_str(), mode);
}

inline std::string slurp(const fs::path& p) { return read_file(p); }

// Where two byte strings (blobs, compressed streams) part, for a failure
// that says more than "false"; "identical" when they do not.
inline std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i == a.size() && i == b.size()) return "identical";
  return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()) + ", first difference at byte " +
         std::to_string(i);
}

// A "host" directory (0700) beside where a hostile archive is unpacked,
// holding a secret (0600): nothing may read it into the target or change it.
struct HostCanary {
  fs::path dir;
  explicit HostCanary(fs::path at) : dir(std::move(at)) {
    write(dir / "secret", "host secret", 0600);
    ::chmod(dir.c_str(), 0700);
  }
  // The directory's and the secret's modes, the secret's bytes, the entries' count.
  std::string state() const {
    struct stat d {}, f {};
    ::stat(dir.c_str(), &d);
    ::stat((dir / "secret").c_str(), &f);
    return std::to_string(d.st_mode) + "/" + std::to_string(f.st_mode) + "/" + read_file(dir / "secret") + "/" +
           std::to_string(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  }
  // How many regular files below `tree` (if there) hold the secret's bytes.
  int copies_in(const fs::path& tree) const {
    int n = 0;
    if (fs::exists(tree))
      for (auto& e : fs::recursive_directory_iterator(tree))
        if (fs::is_regular_file(fs::symlink_status(e.path())) && read_file(e.path()) == "host secret") ++n;
    return n;
  }
};

// Where golden files live; SB_UPDATE_GOLDEN=1 rewrites them.
inline fs::path golden_dir() { return fs::path(SB_SOURCE_DIR) / "tests" / "golden"; }

inline void check_golden(const std::string& name, const std::string& actual, std::string& expected) {
  fs::path p = golden_dir() / name;
  if (const char* u = getenv("SB_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    fs::create_directories(p.parent_path());
    write_file_atomic(p, actual);
  }
  expected = fs::exists(p) ? read_file(p) : "<missing golden file " + p.string() + ">";
}

// A two-point matrix over a recipe variable: the `base` layer is the same at
// both points, the `flavor` layer copies a per-point file to a per-point place.
inline const std::string kFlavorMatrix =
    "stack: mx\n"
    "source_date_epoch: 1700000000\n"
    "matrix:\n  flavor: [a, b]\n"
    "layers:\n"
    "  - {name: base, copy: [{src: common.txt, dst: /etc/common.txt}]}\n"
    "  - {name: flavor, copy: [{src: \"${flavor}.txt\", dst: \"/opt/${flavor}/flavor.txt\"}]}\n"
    "config:\n  env: {FLAVOR: \"${flavor}\"}\n"
    "tags: [\"mx:${flavor}\"]\n";

// Writes `yaml` as dir/r.yaml with the files kFlavorMatrix copies; returns its path.
inline fs::path write_flavor_matrix(const fs::path& dir, const std::string& yaml = kFlavorMatrix) {
  write(dir / "common.txt", "shared by every point\n");
  write(dir / "a.txt", "flavor a\n");
  write(dir / "b.txt", "flavor b\n");
  write(dir / "r.yaml", yaml);
  return dir / "r.yaml";
}

}  // namespace sb::test
