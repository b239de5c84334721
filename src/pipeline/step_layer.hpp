// Internal to pipeline/: the build kind, layers made by `build:` steps
// (their roots and sandbox: step_runner.hpp).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "layer/tree.hpp"
#include "pipeline/build_options.hpp"
#include "util/file.hpp"

namespace sb {

// One layer made by build steps: from the cache when its key is there, else
// its steps run in the sandbox on the layers below and their changeset is
// written. The key hashes the parent's key, the layer's spec (with ${vars}
// expanded), the steps' whole environment, compression and the epoch.
LayerReport build_step_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                             const std::vector<Layer>& below, const std::vector<std::string>& below_names,
                             const Store& store,
                             const BuildOptions& options, int64_t epoch, Status& status,
                             Digest& key_out);

}  // namespace sb
