// Dependency resolution over wheels: requirements in, one wheel per project
// out, chosen for the image's Python, libc and architecture (never the
// host's). Versions newest first, pre-releases only when asked for or when
// nothing else fits; `Requires-Dist` with markers evaluated for the target
// and the extras asked; a project that must change version drops what its
// old version asked for. A conflict is explained by who asked for what.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fetch/pip/index.hpp"
#include "fetch/pip/requirement.hpp"
#include "fetch/pip/tags.hpp"

namespace sb::pip {

struct PinnedWheel {
  std::string name;        // the project's name, as its metadata spells it
  std::string key;         // normalised
  std::string version;
  std::string filename, url;  // url: "" in a lockfile, which names files, not hosts
  std::optional<Digest> sha256;
  std::optional<uint64_t> size;
  bool requested = false;  // named by the user (REQUESTED in the image)
  std::set<std::string> extras;
  std::vector<std::string> requires_dist;  // the metadata's, for `pip check`-like checks
};
void to_json(nlohmann::json& j, const PinnedWheel& w);
void from_json(const nlohmann::json& j, PinnedWheel& w);

struct ResolveOptions {
  bool pre = false;                 // allow pre-releases everywhere
  std::set<std::string> provided;   // projects already in the image (not installed again)
  // Projects a lower layer installed (normalised name -> version, and the
  // layer's name): kept, as pip keeps a satisfied requirement, when every
  // requirement on them accepts that version; an error naming both otherwise.
  struct Installed {
    std::string version, layer;
  };
  std::map<std::string, Installed> installed;
  // Constraints, as pip's `-c`: they narrow a project's versions when something
  // asks for it, and never add a project. The string says who set it
  // ("the point's cudnn 9.1.0.70"), for conflicts.
  std::vector<std::pair<Requirement, std::string>> constraints;
  int max_rounds = 20000;
};

// Resolves `roots`; returns the wheels sorted by key. Throws sb::Error when a
// project has no wheel for the target or the constraints on it clash.
std::vector<PinnedWheel> resolve(const std::vector<Requirement>& roots, const Target& target, Index& index,
                                 const ResolveOptions& options = {});

}  // namespace sb::pip
