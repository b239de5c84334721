// Verifying one image, as `stackbuild test` and the gate of `stackbuild
// build` do: unpack it (cached in the store), run the static checks, look for
// the host's GPU, check its driver against the image's requirement, then run
// the tests the image records (its recipe's and the built-in ones) in the
// sandbox. And the gate: whether a build may push what it verified.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "image/layout.hpp"
#include "sandbox/sandbox.hpp"
#include "store/store.hpp"
#include "util/status.hpp"
#include "verify/image_tests.hpp"
#include "verify/report.hpp"

namespace sb::verify {

struct VerifyOptions {
  std::string gpus = "all";                        // --gpus; "none" skips the GPU tests
  std::optional<std::vector<std::string>> arch;    // --arch; default: the dev.stackbuild.arch label
  std::map<std::string, std::string> expect;       // --expect, over the version labels
  // The tests to run; nullopt: those the image's dev.stackbuild.tests label records.
  std::optional<RecordedTests> tests;
  bool compile_builtins = false;                   // compile the CUDA programs even without a GPU
  fs::path nvcc;                                   // --nvcc
  fs::path host_root = "/";                        // where the GPU driver is looked for
  sandbox::Sandbox* sandbox = nullptr;             // null: the Linux sandbox
  bool record_opened = false;                      // the files the tests open, into the report (root only)
};

// `name` names the image in the report ("out/app:1", or the point and tag).
VerifyReport verify_image(const Store& store, const LayoutImage& image, const std::string& name,
                          const VerifyOptions& options, Status& status);

// An image of a build (its blobs in the store) as verify_image takes it.
LayoutImage stored_image(const Store& store, const std::string& manifest_json, const std::string& config_json,
                         const Digest& manifest_digest, const std::vector<Digest>& layers);

struct GateDecision {
  bool push = true;
  std::string message;  // what failed, one line per failed test, naming image and test
};

// Whether a build may push after these reports: not when a test failed,
// unless `no_verify` (then it says what it let through).
GateDecision gate(const std::vector<VerifyReport>& reports, bool no_verify);

}  // namespace sb::verify
