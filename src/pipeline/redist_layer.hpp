// Layers made of NVIDIA's redistributable archives: a catalog layer (`use:
// cuda`, `use: cublas`, ...) whose chosen records have a `redist` source.
// The manifest redistrib_<version>.json is read from the mirror named by
// STACKBUILD_REDIST_URL (the directory holding <product>/redist/; NVIDIA's
// public one by default), the
// components for the recipe's architecture and CUDA major are fetched with
// size and sha256 checked, and unpacked into /usr/local/cuda-X.Y with
// /usr/local/cuda pointing at it. See docs/redist.md.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/build_options.hpp"

namespace sb {

// Whether the driver builds `spec` through the redist source: a `use:` layer
// of catalog components (not an OS; `from: redist` or no `from:`), without
// apt/pip/copy/build.
bool is_redist_layer(const LayerSpec& spec);

struct RedistRequest {
  std::string product;
  std::string manifest_version;         // redistrib_<manifest_version>.json, or
  std::string archive;                  // one manifest-less archive (NCCL), "{arch}" in it
  std::vector<std::string> components;
  std::string version;                  // the catalog record's version
};

// What a redist layer fetches at this point, one request per component the
// layer uses, from the records the point chose (in point.catalog). Throws
// sb::Error when a chosen record has no redist source.
std::vector<RedistRequest> redist_requests(const LayerSpec& spec, const std::map<std::string, std::string>& variables,
                                           const PointInputs& point);


}  // namespace sb
