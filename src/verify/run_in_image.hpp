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
};

// Runs the command in a fresh writable layer over `root` (discarded after),
// streaming its output. Returns its exit status (128+N for signal N).
sandbox::SandboxResult run_in_image(sandbox::Sandbox& sandbox, const ImageRoot& root, const RunOptions& options,
                                    const sandbox::OutputFn& output);

}  // namespace sb::verify
