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
//   - a package installed in a lower layer is kept, unless this layer asks
//     for it and has a newer candidate (or names a version: "name=1.2"), or
//     a dependency needs a newer version than the one below: then the newer
//     one replaces it (an upgrade; never an implicit downgrade), provided
//     every package left below still has what it depends on;
//   - Recommends are installed only with `recommends` (off by default, as
//     apt's --no-install-recommends), after every Depends is met, each
//     group's first alternative that can be installed; one that cannot is
//     left out, as apt does. Suggests never are.
// On failure the error says which package needs what, and why nothing fits:
//   python3-torch-cuda: depends on libcudart12 (>= 12.4) which no source provides
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fetch/apt/control.hpp"
#include "fetch/apt/index.hpp"

namespace sb::apt {

struct SolveRequest {
  std::vector<std::string> packages;   // "name", "name=version"
  bool essential = false;              // add every Essential: yes package
  std::string priority;                // "required", "important" or "standard": add every package of
                                       // that Priority and above (debootstrap's variants); "" = none
  std::vector<Paragraph> installed;    // packages in lower layers (dpkg status records)
  bool recommends = false;             // install Recommends too
};

struct Solution {
  std::vector<const Package*> packages;          // to install, by name
  std::map<std::string, std::string> reason;     // name -> what pulled it in ("requested", "essential", "python3")
  std::map<std::string, std::string> upgraded;   // name -> the version below that packages[] replaces
};

Solution solve(const PackageIndex& index, const SolveRequest& request);

}  // namespace sb::apt
