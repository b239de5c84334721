// Checks that need no GPU, run on an unpacked image:
//   - every ELF file's needed libraries resolve inside the image (the NVIDIA
//     driver's libraries excepted: the host injects them at run time);
//   - every CUDA binary carries code for each requested compute capability;
//   - the CUDA, cuDNN, NCCL and PyTorch versions inside the image are the
//     expected ones (verify/versions.hpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "verify/fatbin.hpp"
#include "verify/image_root.hpp"
#include "verify/report.hpp"
#include "verify/versions.hpp"

namespace sb::verify {

// Libraries that come from the host's driver, never from the image.
bool is_driver_library(const std::string& soname);

// Both checks take `ignore`: globs of image paths (the recipe's
// static_checks, util/glob.hpp) whose files' findings do not fail the check.
// Each such finding is still listed, as "ignored (GLOB): ...", the message
// counts the files ignored, and a glob that let nothing through is listed as
// unused (a stale exemption), none of which fails the check.

// `ld_library_path`: the image config's LD_LIBRARY_PATH entries.
TestResult check_libraries(const ImageRoot& root, const std::vector<std::string>& ld_library_path,
                           const std::vector<std::string>& ignore = {});

// The CUDA binaries of an image: the ELF files with GPU code
// (verify/fatbin.hpp: their .nv_fatbin section and the fat binaries embedded
// in their data), each with its code, and the files whose code could not be
// read. Read once for the static arch check and the GPU's.
struct CudaBinaries {
  std::vector<std::pair<std::string, GpuCode>> code;        // image path -> code
  std::vector<std::pair<std::string, std::string>> broken;  // image path -> error
};
CudaBinaries cuda_binaries(const ImageRoot& root);

// `arch`: compute capabilities such as {"8.0", "9.0"}.
TestResult check_cuda_arch(const ImageRoot& root, const std::vector<std::string>& arch,
                           const std::vector<std::string>& ignore = {});
TestResult check_cuda_arch(const CudaBinaries& binaries, const std::vector<std::string>& arch,
                           const std::vector<std::string>& ignore = {});

// Whether every CUDA binary has code that runs on a GPU here of compute
// capability `arch` ("9.0"): SASS of its major version not above it, or PTX
// it can compile (fatbin.hpp, runs_on). A "gpu" result named for that GPU;
// the static check covers the requested archs, this one the GPU an image is
// tested on, which may be none of them (an image for sm_80 on an H200 has no
// code the H200 runs, and its GPU tests fail with "no kernel image is
// available"). `gpus` names the GPUs of that arch ("GPU 0, 1").
TestResult check_gpu_code(const CudaBinaries& binaries, const std::string& arch,
                          const std::string& gpus, const std::vector<std::string>& ignore = {});

}  // namespace sb::verify
