// .deb files: an ar archive of debian-binary, control.tar.* and data.tar.*.
// read_deb() reads the control members into memory and unpacks data.tar's
// entries as layer entries, with file contents written under a staging
// directory (nothing is written outside it; owners and modes come from the
// archive, not from the host).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fetch/apt/control.hpp"
#include "archive/entry.hpp"

namespace sb::apt {

struct DebContents {
  Paragraph control;                            // the control file's fields
  std::map<std::string, std::string> control_files;  // "postinst", "md5sums", "conffiles", ...
  std::vector<std::string> paths;               // data.tar's paths in archive order: "/.", "/usr", ...
  EntryMap entries;                             // canonical path ("usr/bin/x") -> entry
};

// Reads `deb`; regular files go to fresh files under `staging` (which must
// exist). mtimes are clamped to `epoch`. Throws an Error naming `deb` for
// anything malformed: not an ar archive, no control or data member, unsafe paths.
DebContents read_deb(const fs::path& deb, const fs::path& staging, int64_t epoch);

}  // namespace sb::apt
