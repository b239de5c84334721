// Internal to pipeline/: layers made by `build:` steps, and the root
// directories they run on.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "build/privileged.hpp"
#include "layer/tree.hpp"
#include "pipeline/build.hpp"
#include "util/file.hpp"

namespace sb {

// The layers below, unpacked in order by the safe extractor into one
// directory of the store: <store>/rootfs/<chain>/tree, where <chain> hashes
// their diff_ids. Made once (in a temporary directory renamed into place),
// from the tree of all but the last layer when there is one (hardlinked:
// nothing writes into these trees), and shared by every build that needs it.
// Owners are the image's (as root); device nodes are left out (the sandbox
// has its own /dev), and so are setuid and setgid bits and file
// capabilities: those are recorded in <chain>/privileged.json and given back
// inside the sandbox only (build/privileged.hpp).
struct CachedRoot {
  fs::path tree;
  PrivilegedFiles privileged;
};
CachedRoot cached_root(const Store& store, const std::vector<Layer>& layers, Status& status);

// One layer made by build steps: from the cache when its key is there, else
// its steps run in the sandbox on the layers below and their changeset is
// written. The key hashes the parent's key, the layer's spec (with ${vars}
// expanded), the steps' whole environment, compression and the epoch.
LayerReport build_step_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                             const std::vector<Layer>& below, const std::vector<std::string>& below_names,
                             const Store& store,
                             const BuildOptions& options, int64_t epoch, Status& status,
                             Digest& key_out);

// Runs `steps` in the sandbox on the layers below plus `entries` (as one more
// layer on top) and folds what they change into `entries`: changed and added
// files over them, deleted ones out of them (and whiteouts where a layer
// below has the path). The returned directory holds the changed files' data:
// keep it until the entries are written. The log is named after `key`.
// (apt layers' `configure: true`: pipeline/apt_layer.cpp.)
std::unique_ptr<TempDir> run_on_entries(const Recipe& recipe, const LayerSpec& spec, const BuildSpec& steps,
                                        const std::vector<Layer>& below, EntryMap& entries, const Store& store,
                                        const BuildOptions& options, int64_t epoch, Status& status,
                                        const Digest& key);

}  // namespace sb
