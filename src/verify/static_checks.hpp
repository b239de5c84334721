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

#include "verify/image_root.hpp"
#include "verify/report.hpp"
#include "verify/versions.hpp"

namespace sb::verify {

// Libraries that come from the host's driver, never from the image.
bool is_driver_library(const std::string& soname);

// `ld_library_path`: the image config's LD_LIBRARY_PATH entries.
TestResult check_libraries(const ImageRoot& root, const std::vector<std::string>& ld_library_path);

// `arch`: compute capabilities such as {"8.0", "9.0"}.
TestResult check_cuda_arch(const ImageRoot& root, const std::vector<std::string>& arch);

}  // namespace sb::verify
