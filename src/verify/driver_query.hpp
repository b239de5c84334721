// What only the driver's own libraries can say about the host, and what the
// NVIDIA container toolkit checks an image's NVIDIA_REQUIRE_* against: the
// CUDA version of the host's libcuda (cuDriverGetVersion, which needs no
// GPU) and, through NVML, each selected GPU's brand and compute capability.
//
// The libraries are loaded in a short-lived child process, as
// libnvidia-container asks the driver from a child of its own: a driver
// library never loads into stackbuild, and one that crashes or hangs costs
// only these facts. Where a library is missing, or is not a real driver (the
// fake trees of the tests), the facts stay empty.
#pragma once

#include <chrono>

#include "verify/gpu.hpp"

namespace sb::verify {

// Sets g.cuda_version from the libcuda.so.* that g mounts, and each of
// g.gpus' brand and arch from the libnvidia-ml.so.* it mounts (a GPU is found
// in NVML by its UUID, else its PCI address, else its index), and its model
// and UUID where those are empty (a GPU known only by its /dev/nvidiaN node);
// both libraries are looked for under `host_root`.
void query_driver(GpuInjection& g, const fs::path& host_root,
                  std::chrono::milliseconds timeout = std::chrono::seconds(20));

// The toolkit's name of an NVML brand (nvmlBrandType_t): 2 -> "tesla",
// 14 -> "nvidia", 13 -> "nvidiartx"; "" for NVML_BRAND_UNKNOWN and numbers
// it does not know.
std::string nvml_brand_name(int brand);

}  // namespace sb::verify
