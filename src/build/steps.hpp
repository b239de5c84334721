// The build stage: a layer's `build:` steps, run one after the other in the
// sandbox on top of the layers below, become the layer's Changeset.
//
// All steps of a layer share one writable upper directory, so a later step
// sees what an earlier one wrote; `cache:` directories are bound from the
// store, outside the image, and persist between builds (as BuildKit's cache
// mounts). Output streams through Status, one line at a time under the layer's
// name, and into a log file; a failing step throws a BuildError with its exit
// status, the log's path and its last lines.
#pragma once

#include <deque>
#include <map>
#include <string>

#include "build/changeset.hpp"
#include "recipe/recipe.hpp"
#include "sandbox/sandbox.hpp"
#include "util/error.hpp"
#include "util/status.hpp"

namespace sb {

class BuildError : public Error {
 public:
  BuildError(const std::string& what, int exit_status, fs::path log)
      : Error(what), exit_status_(exit_status), log_(std::move(log)) {}
  int exit_status() const { return exit_status_; }
  const fs::path& log() const { return log_; }

 private:
  int exit_status_;
  fs::path log_;
};

struct StepsInput {
  std::string layer;                       // the layer's name, for output and errors
  BuildSpec spec;                          // with ${vars} already expanded
  std::map<std::string, std::string> env;  // the steps' whole environment (step_environment)
  fs::path lower;                          // the root made of the layers below (never written)
  PrivilegedFiles privileged;              // lower's setuid, setgid and capability files (build/privileged.hpp)
  fs::path scratch;                        // an empty directory for the upper, work and stubs
  fs::path cache_root;                     // where `cache:` directories live between builds
  fs::path log;                            // the output goes here
  bool overlay = true;                     // false: the copy-and-compare fallback
  // A prepared source tree (moved, not copied, when on the same filesystem),
  // placed at `source_at` in the image: in the layer when `keep_source`
  // (below the steps' writes, so the tree and what they build both stay),
  // else bound there read-write from outside, so it stays out of the layer.
  // The steps' working directory defaults to it.
  fs::path source;
  std::string source_at;
  bool keep_source = false;
  std::string architecture;  // the image's, when not the host's: the steps run emulated
};

// Runs the steps and returns the changeset (its root is inside `scratch`).
Changeset run_build_steps(const StepsInput& input, sandbox::Sandbox& sandbox, Status& status);

// The environment of a layer's steps, weakest first: a base (PATH, HOME,
// SOURCE_DATE_EPOCH), the recipe's config.env, the matrix point's variables
// (SB_<NAME>, and for `arch` TORCH_CUDA_ARCH_LIST and CMAKE_CUDA_ARCHITECTURES,
// for `cuda` CUDA_HOME and CUDA_VERSION, for cudnn and nccl <NAME>_VERSION),
// `library_paths` (where the layers below put cuDNN and NCCL:
// pipeline/library_paths.hpp), then the layer's build.env.
std::map<std::string, std::string> step_environment(
    const Recipe& recipe, const BuildSpec& spec,
    const std::map<std::string, std::string>& variables, int64_t source_date_epoch,
    const std::map<std::string, std::string>& library_paths = {});

// "8.0;8.6+PTX;9.0a" -> "80-real;86;90a-real" (CMake's CUDA_ARCHITECTURES).
std::string cmake_cuda_architectures(const std::string& torch_arch_list);

// The store directory that holds the `cache:` directory at image path `path`.
std::string cache_dir_name(const std::string& path);

}  // namespace sb
