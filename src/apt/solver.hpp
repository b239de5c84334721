// Dependency resolution over a PackageIndex, the way apt chooses for one
// architecture, deterministically:
//   - each name's candidate is its best version (pin priority, then newest);
//   - requested packages are marked first, then their Pre-Depends and
//     Depends are satisfied depth first, in field order; an OR group already
//     satisfied by a marked (or lower-layer) package needs nothing, else its
//     alternatives are tried in order (a real package's candidate, then other
//     versions that fit, then providers of a virtual name), backtracking when
//     a choice fails further down;
//   - Conflicts and Breaks (by name, version and Provides) rule a choice out;
//   - "name:any" and "name:native" mean "name" (one architecture).
// Recommends and Suggests are not installed (apt's --no-install-recommends).
// On failure the error says which package needs what, and why nothing fits:
//   python3-torch-cuda: depends on libcudart12 (>= 12.4) which no source provides
#pragma once

#include <map>
#include <string>
#include <vector>

#include "apt/control.hpp"
#include "apt/index.hpp"

namespace sb::apt {

struct SolveRequest {
  std::vector<std::string> packages;   // "name", "name=version"
  bool essential = false;              // add every Essential: yes package
  bool required = false;               // add every Priority: required package
  std::vector<Paragraph> installed;    // packages in lower layers (dpkg status records)
};

struct Solution {
  std::vector<const Package*> packages;          // to install, by name
  std::map<std::string, std::string> reason;     // name -> what pulled it in ("requested", "essential", "python3")
};

Solution solve(const PackageIndex& index, const SolveRequest& request);

}  // namespace sb::apt
