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

}  // namespace sb::test
