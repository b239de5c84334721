// Layers made of NVIDIA's redistributable archives: a catalog layer (`use:
// cuda`, `use: cublas`, ...) whose chosen records have a `redist` source.
// The manifest redistrib_<version>.json is read from the mirror named by
// STACKBUILD_REDIST_URL (the directory holding <product>/redist/), the
// components for the recipe's architecture and CUDA major are fetched with
// size and sha256 checked, and unpacked into /usr/local/cuda-X.Y with
// /usr/local/cuda pointing at it. See docs/redist.md.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/build.hpp"

namespace sb {

// Whether the driver builds `spec` through the redist source: a `use:` layer
// of catalog components (not an OS, not `from:`), without apt/pip/copy/build.
bool is_redist_layer(const LayerSpec& spec);

struct RedistRequest {
  std::string product, manifest_version;
  std::vector<std::string> components;
};

// What a redist layer fetches at this point, one request per manifest.
// Throws sb::Error when a chosen record has no redist source.
std::vector<RedistRequest> redist_requests(const Recipe& recipe, const LayerSpec& spec,
                                           const std::map<std::string, std::string>& variables);

// Builds one redist layer; `key_parent`/`key_out` as for the other layers.
LayerReport build_redist_layer(const Recipe& recipe, const LayerSpec& spec, const Digest& key_parent,
                               const Store& store, const BuildOptions& options, int64_t epoch, Status& status,
                               Digest& key_out);

// The "redist" object of one point for the lockfile: per redist layer, each
// manifest's URL and sha256 and each archive's component, version, URL, size
// and sha256.
nlohmann::json lock_redist_layers(const Recipe& instantiated, const std::map<std::string, std::string>& variables,
                                  const Store& store, Status& status);

}  // namespace sb
