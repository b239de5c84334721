// Internal to pipeline/: what the layer kinds that run build steps share
// (the build kind, step_layer.cpp; the apt kind's `configure: true`,
// apt_layer.cpp), so that neither includes the other.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "build/privileged.hpp"
#include "build/steps.hpp"
#include "layer/tree.hpp"
#include "pipeline/build_options.hpp"
#include "sandbox/sandbox.hpp"
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

// Where steps run: options.services.sandbox (tests), else a LinuxSandbox, with
// overlayfs unless it is unavailable or STACKBUILD_SANDBOX_OVERLAY=0 (which
// tests also set for their own sandbox, to run the copy mode).
struct SandboxChoice {
  std::unique_ptr<sandbox::Sandbox> own;
  sandbox::Sandbox* sandbox = nullptr;
  bool overlay = true;
};
SandboxChoice choose_sandbox(const std::string& layer, const BuildOptions& options, const Store& store,
                             Status& status);

// Where a layer's `cache:` directories live: <store>/cache/<stack>/<layer>/,
// or linked to <store>/cache/@shared/NAME for `{path, shared: NAME}`.
fs::path cache_root(const Recipe& recipe, const LayerSpec& spec, const BuildSpec& steps, const Store& store);

// What both kinds do before their steps run, into `in` (its layer, spec and
// env set): the sandbox, the root of the layers `below` (and its privileged
// files), a scratch directory, the `cache:` directories and the log (named
// after `key`). Keep the scratch directory until the layer is written.
struct StepsSetup {
  SandboxChoice sandbox;
  std::unique_ptr<TempDir> scratch;
};
StepsSetup prepare_steps(StepsInput& in, const Recipe& recipe, const LayerSpec& spec, const std::vector<Layer>& below,
                         const Store& store, const BuildOptions& options, Status& status, const Digest& key);

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
