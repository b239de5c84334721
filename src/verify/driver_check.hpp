// Whether an image can run on this host's driver, decided before any GPU
// test runs (docs/testing.md, "The driver check").
//
// Two things say what an image needs of the driver: stackbuild's own
// dev.stackbuild.driver_min label (the resolver's floor: the newest CUDA
// release's own minimum driver, Table 3), and the image's NVIDIA_REQUIRE_*
// variables, which the NVIDIA container toolkit checks before it starts a
// container. NVIDIA's images, and stackbuild's through ${nvidia_require_cuda},
// accept there the older driver branches a CUDA release runs on under CUDA
// compatibility ("cuda>=12.8 brand=tesla,driver>=535,driver<536 ...").
//
// The image can run here when the driver meets the floor and the toolkit
// would start it; below the floor, when NVIDIA_REQUIRE_* accepts this host
// (or is switched off with NVIDIA_DISABLE_REQUIRE), or, with no requirement
// to check, when the image's forward-compatibility libcuda
// (/usr/local/cuda/compat) meets the floor. Below the floor, without such a
// libcuda, it runs only under minor version compatibility, within its CUDA
// major version. The GPU tests then show whether it really does.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "verify/gpu.hpp"

namespace sb::verify {

enum class Truth { False, Unknown, True };

// What a constraint is compared with, for one GPU; "" where it is not known.
struct HostProperties {
  std::string cuda;    // the driver's CUDA version, "12.2"
  std::string driver;  // "535.104.05"
  std::string arch;    // the GPU's compute capability, "9.0"
  std::string brand;   // "tesla"
};

// One NVIDIA_REQUIRE_* variable of an image.
struct Requirement {
  std::string name;        // "NVIDIA_REQUIRE_CUDA"
  std::string expression;  // "cuda>=12.8 brand=tesla,driver>=535,driver<536"
};

// True when the image's NVIDIA_DISABLE_REQUIRE is a true boolean ("1",
// "true", "TRUE", "t"...), as the toolkit reads it.
bool requirements_disabled(const std::map<std::string, std::string>& env);

// The requirements the toolkit reads from an image's environment: every
// NVIDIA_REQUIRE_* but NVIDIA_REQUIRE_JETPACK*, and for a legacy image
// (CUDA_VERSION without NVIDIA_REQUIRE_CUDA) "cuda>=MAJOR.MINOR"; none when
// requirements_disabled(). Throws sb::Error for a legacy CUDA_VERSION that
// is not a version.
std::vector<Requirement> image_requirements(const std::map<std::string, std::string>& env);

// Evaluates one requirement as the toolkit does: space-separated terms are
// ORed, comma-separated factors ANDed; a factor is PROPERTY OP VALUE with OP
// one of != <= >= = < > and PROPERTY one of cuda, driver, arch (compared as
// versions) and brand (as a string); a factor on any other property is left
// out. A factor whose property is not known here is Unknown (AND and OR
// then follow three-valued logic). Throws sb::Error naming the variable for
// a factor without an operator, or a version that is not one.
Truth evaluate(const Requirement& r, const HostProperties& host);

// What an image says it needs of the driver.
struct ImageDriverNeeds {
  std::string driver_min;                  // the dev.stackbuild.driver_min label; "" for none
  std::map<std::string, std::string> env;  // the image config's environment
  std::string compat_driver;  // the version of its /usr/local/cuda/compat/libcuda.so; "" for none
  std::string cuda;           // its CUDA version, "12.8.1"; "" where it does not say
};

// The needs of an image from its config's labels and `env` (the environment
// its commands get), and `compat_driver` (compat_driver_version()). Its CUDA
// version is the dev.stackbuild.version.cuda label, else CUDA_VERSION.
ImageDriverNeeds driver_needs(const std::map<std::string, std::string>& labels,
                              const std::map<std::string, std::string>& env,
                              const std::string& compat_driver);

struct DriverVerdict {
  std::string detail;                 // what was checked, for the report
  std::vector<std::string> warnings;  // e.g. that it runs under CUDA compatibility
};

// Decides as the header says, for every GPU of `gpu` (each is evaluated with
// its own brand and arch, as libnvidia-container does per visible device).
// Throws sb::Error saying what the image needs and what this host has when
// the image cannot run here.
DriverVerdict check_driver(const GpuInjection& gpu, const ImageDriverNeeds& needs);

}  // namespace sb::verify
