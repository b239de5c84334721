// Built-in tests, one per catalog component that has one: CUDA (a device
// query and a kernel's result), cuBLAS (a GEMM against a CPU result), cuDNN
// (a convolution forward), NCCL (an all-reduce over every visible GPU) and
// PyTorch, JAX, TensorFlow (a matmul on the GPU checked against the CPU).
// All of those need a GPU. The frameworks also get "builtin: <name> import",
// which needs none and runs on every host: the framework imports with the
// image's libraries and the CUDA, cuDNN and NCCL versions it reports equal
// the resolved ones.
//
// The CUDA programs (tests/gpu/programs, embedded in stackbuild) are compiled
// against the image's own CUDA: with the image's nvcc, run in the sandbox,
// when the image has nvcc and a C++ compiler; else with the host's nvcc
// (--nvcc, $STACKBUILD_NVCC, nvcc on PATH, /usr/local/cuda/bin/nvcc) given
// the image's headers and libraries first. Either way the program must link
// the image's libcudart, which is checked on the binary. Binaries are cached
// in the store by image and program.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/sandbox.hpp"
#include "verify/image_root.hpp"
#include "verify/image_tests.hpp"

namespace sb::verify {

// The embedded program sources: "device_query.cu", "common.h", ...
const std::map<std::string, std::string>& builtin_program_sources();

struct BuiltinOptions {
  std::map<std::string, std::string> versions;  // component -> resolved version (image labels)
  std::vector<std::string> arch;                // compute capabilities to compile for; empty: 8.0
  std::vector<std::string> ld_library_path;     // the image config's LD_LIBRARY_PATH
  bool compile = false;                         // compile the CUDA programs now
  fs::path cache_dir;                           // where compiled programs are kept
  fs::path host_nvcc;                           // empty: looked up
  sandbox::Sandbox* sandbox = nullptr;          // for the image's nvcc
  // The image's architecture when it is not this machine's: its nvcc runs
  // under QEMU (the host's would build for the host), "" otherwise.
  std::string architecture;
};

// What compiling one program did.
struct CompiledProgram {
  std::string component;
  fs::path binary;                     // empty when it failed
  std::string compiler;                // "image nvcc /usr/local/cuda/bin/nvcc" or "host nvcc PATH"
  std::string cudart;                  // the libcudart soname it needs, found in the image at...
  std::string cudart_in_image;         // ... this image path
  std::vector<std::string> lib_dirs;   // image dirs its libraries are in (for LD_LIBRARY_PATH)
  std::string error;                   // why it failed
};

// Compiles the program of `component` (cuda, cublas, cudnn, nccl).
CompiledProgram compile_builtin(const ImageRoot& root, const std::string& component, const BuiltinOptions& options);

// The tests for `components`; with options.compile, `compiled` receives the
// compile results (each becomes a report line of its own).
std::vector<ImageTest> builtin_tests(const ImageRoot& root, const std::vector<std::string>& components,
                                     const BuiltinOptions& options, std::vector<CompiledProgram>& compiled);

// The host nvcc to use: `given`, else $STACKBUILD_NVCC, nvcc on PATH,
// /usr/local/cuda/bin/nvcc; empty when there is none.
fs::path find_host_nvcc(const fs::path& given = {});

}  // namespace sb::verify
