// The static check "versions match the lockfile": which CUDA, cuDNN, NCCL and
// PyTorch an unpacked image holds, read from the files that say so, against
// the expected (resolved) versions. Two layouts are read, both when both are
// there:
//   - a CUDA toolkit tree: /usr/local/cuda/version.json, cudnn_version.h,
//     nccl.h and cuda_runtime_api.h in /usr/include or /usr/local/cuda/include;
//   - NVIDIA's pip wheels in a Python's site- or dist-packages:
//     nvidia/<lib>/include/{cudnn_version.h,nccl.h,cuda_runtime_api.h}, the
//     wheels' *.dist-info/METADATA (nvidia-cudnn-cu12, nvidia-nccl-cu12,
//     nvidia-cuda-runtime-cu12, ...) and torch/version.py.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "verify/image_root.hpp"
#include "verify/report.hpp"

namespace sb::verify {

// One statement of a version in the image.
struct FoundVersion {
  std::string component;  // "cuda", "cudnn", "nccl", "pytorch"
  std::string version;    // as the file says it: "12.6.77", "2.7.0+cu126"
  std::string compared;   // what is compared: "12.6" (a runtime wheel's own patch level is not CUDA's), "2.7.0"
  std::string file;       // the image path of the file that says it

  bool operator==(const FoundVersion&) const = default;
};

// Image paths of the Python package directories (.../python3.X/site-packages
// or dist-packages, and Debian's python3/dist-packages), sorted.
std::vector<std::string> python_package_dirs(const ImageRoot& root);

// Every version the image states, toolkit tree first, then each package
// directory in order; a file reached by two paths counts once.
std::vector<FoundVersion> image_versions(const ImageRoot& root);

// Whether `found` and `expected` agree at the precision of the shorter:
// "12.6" and "12.6.3", "9.5.1" and "9.5.1.17" do; "12.6" and "12.60" do not.
bool version_matches(const std::string& found, const std::string& expected);

// `expected`: component -> version (the image's dev.stackbuild.version.*
// labels, or --expect). Fails naming file, found and expected for each
// disagreement; skipped, saying why, when nothing can be compared.
TestResult check_versions(const ImageRoot& root, const std::map<std::string, std::string>& expected);

}  // namespace sb::verify
