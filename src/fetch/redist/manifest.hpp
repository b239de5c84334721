// NVIDIA's redistributable archives: the `redistrib_<version>.json`
// manifests (CUDA, cuDNN, ...) and the choice of archives for an image.
//
//   {"release_date": "2024-04-15", "release_label": "12.4.1", "release_product": "cuda",
//    "cuda_cudart": {"name": "CUDA Runtime (cudart)", "license": "CUDA Toolkit", "version": "12.4.127",
//      "linux-x86_64": {"relative_path": "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-12.4.127-archive.tar.xz",
//                       "sha256": "...", "md5": "...", "size": "1033588"}, ...},
//    "cudnn": {..., "cuda_variant": ["11", "12"],
//      "linux-x86_64": {"cuda11": {"relative_path": ...}, "cuda12": {...}}}}
//
// Older manifests lack release_date/label/product or license; they parse.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/digest.hpp"

namespace sb::redist {

struct Artifact {
  std::string relative_path;
  std::string sha256;  // hex; checked through the fetcher
  std::string md5;
  uint64_t size = 0;
};

struct Component {
  std::string key;      // cuda_cudart, libcublas, cudnn
  std::string name, license, version;
  std::vector<std::string> cuda_variants;  // cuDNN: "11", "12"
  // platform -> variant ("" when the component has none) -> archive
  std::map<std::string, std::map<std::string, Artifact>> platforms;
};

struct Manifest {
  std::string release_date, release_label, release_product;
  std::map<std::string, Component> components;
};

// Throws sb::Error naming `where` (the manifest's URL) and the bad key.
Manifest parse_manifest(const std::string& json_text, const std::string& where);

// NVIDIA's platform name for an OCI architecture: amd64 -> linux-x86_64,
// arm64 -> linux-sbsa.
std::string platform_for(const std::string& oci_arch);

// <base>/<product>/redist/redistrib_<version>.json, and an archive's URL.
std::string manifest_url(const std::string& base, const std::string& product, const std::string& version);
std::string artifact_url(const std::string& base, const std::string& product, const Artifact& a);

struct Selected {
  std::string component, version, variant;
  Artifact artifact;
};

// The archives of `wanted` (short names as recipes write them: cudart,
// cublas, nvcc, nvrtc, cudnn; or manifest keys) for `platform` and CUDA
// major `cuda_major`, plus what they need to work (nvcc: the runtime headers,
// CCCL, crt, libnvvm where the manifest has them). Sorted by component.
// Throws sb::Error for an unknown component, a missing platform or variant.
std::vector<Selected> select(const Manifest& m, const std::vector<std::string>& wanted, const std::string& platform,
                             int cuda_major);

}  // namespace sb::redist
