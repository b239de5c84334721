// Running a command inside an unpacked image, through the build sandbox, with
// the host's GPU driver injected when asked (read-only bind mounts of the
// driver's files, the device nodes, then the image's linker cache refreshed),
// as the NVIDIA container toolkit does for a container.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/sandbox.hpp"
#include "verify/gpu.hpp"
#include "verify/image_root.hpp"

namespace sb::verify {

struct RunOptions {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;   // the image config's Env, then overrides
  std::string cwd = "/";
  const GpuInjection* gpu = nullptr;        // inject this host driver; null: no GPU
  fs::path host_root = "/";                 // where the GpuInjection's host paths live
  int64_t timeout_seconds = 0;
  bool network = false;
  std::vector<sandbox::Mount> mounts;       // more host paths to show inside (e.g. test programs)
  std::string architecture;                 // the image's, when not the host's: run emulated
};

// Runs the command in a fresh writable layer over `root` (discarded after),
// streaming its output. Returns its exit status (128+N for signal N). The
// layer is an overlayfs upper directory beside `root` in the store, else in
// the first of $TMPDIR, /tmp, /var/tmp and /dev/shm that overlayfs takes;
// where it takes none (or STACKBUILD_SANDBOX_OVERLAY=0), a full copy of the
// root.
sandbox::SandboxResult run_in_image(sandbox::Sandbox& sandbox, const ImageRoot& root, const RunOptions& options,
                                    const sandbox::OutputFn& output);

// The driver version of the image's CUDA forward-compatibility libcuda
// (/usr/local/cuda/compat/libcuda.so.570.124.06 -> "570.124.06", the newest
// where there are several); "" where it has none.
std::string compat_driver_version(const ImageRoot& root);

// What the driver's injected libraries need from the image that it lacks:
// they load inside it, so libcuda.so's libdl.so.2, libpthread.so.0,
// librt.so.1 and libm.so.6 must be there. Only for the libraries CUDA loads
// to start and compile (libcuda, libnvidia-ml, -ptxjitcompiler, -nvvm,
// -gpucomp; the debugger's or the PKCS#11 one load only when asked for, and
// a minimal image lacks their libutil or libcrypto harmlessly): one warning
// per library naming each missing one (libcuda's also says what CUDA then
// reports instead); none for a library that is not an ELF file.
// `ld_library_path`: the command's LD_LIBRARY_PATH, searched too.
std::vector<std::string> driver_library_gaps(const ImageRoot& root, const GpuInjection& g,
                                             const fs::path& host_root,
                                             const std::vector<std::string>& ld_library_path = {});

// "" where commands run on an overlayfs layer over `root`; else a warning
// that each runs in a full copy of it, saying why, for the caller to show once.
std::string full_copy_warning(const sandbox::Sandbox& sandbox, const ImageRoot& root);

}  // namespace sb::verify
