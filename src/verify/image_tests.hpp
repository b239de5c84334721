// The tests an image carries: the recipe's `tests:` (with ${vars} expanded
// for the image's matrix point) and the built-in tests switched on for its
// catalog components, recorded at build time in the image config's label
// `dev.stackbuild.tests` so that `stackbuild test LAYOUT` runs them without
// the recipe. Each runs in the build sandbox on the unpacked image, and is
// judged by its exit status and, with `expect`, by its output.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "recipe/recipe.hpp"
#include "sandbox/sandbox.hpp"
#include "verify/gpu.hpp"
#include "verify/image_root.hpp"
#include "verify/report.hpp"

namespace sb::verify {

constexpr const char* kTestsLabel = "dev.stackbuild.tests";
constexpr int64_t kDefaultTestTimeout = 600;  // seconds, when a test gives none

// What the label records.
struct RecordedTests {
  std::vector<TestSpec> tests;       // run, expect, gpu, exit, timeout (where is unknown)
  std::vector<std::string> builtin;  // components whose built-in tests run: cuda, cublas, ...
  // The recipe's static_checks: globs of image paths exempt from the arch
  // and the libraries check (reported as ignored).
  std::vector<std::string> arch_ignore, libraries_ignore;
  bool empty() const { return tests.empty() && builtin.empty() && arch_ignore.empty() && libraries_ignore.empty(); }
};

// The label's value for an instantiated recipe whose resolved components are
// `components` (built-in tests only for those, and only those switched on).
std::string tests_label(const Recipe& recipe, const std::vector<std::string>& components);
// Parses the label; throws sb::Error when it is malformed.
RecordedTests parse_tests_label(const std::string& value);

// One test ready to run.
struct ImageTest {
  std::string name;     // "recipe: NAME" or "builtin: cuda"
  std::string kind;     // "recipe" or "builtin"
  std::vector<std::string> argv;
  bool gpu = false;
  std::string expect;   // text the output must contain
  int exit = 0;
  int64_t timeout = 0;  // 0: kDefaultTestTimeout
  std::map<std::string, std::string> env;  // on top of the image's
  std::vector<sandbox::Mount> mounts;      // e.g. compiled built-in programs
  std::string unavailable;                 // why it cannot run (a failed compile): reported failed
};

ImageTest from_spec(const TestSpec& spec);

// Judges one run: passed when it ended in time with `exit` and its output
// holds `expect`; else failed, saying which.
TestResult judge(const ImageTest& test, const sandbox::SandboxResult& result, const std::string& output,
                 double seconds);

struct TestEnvironment {
  std::map<std::string, std::string> env;  // the image config's Env (PATH defaulted)
  std::string cwd = "/";
  const GpuInjection* gpu = nullptr;       // null: GPU tests are skipped
  std::string no_gpu_reason = "no NVIDIA GPU on this host";
  fs::path host_root = "/";
  // An image of another platform: its tests run under this emulator
  // ("qemu-aarch64"), said in each result; or, when the machine has none,
  // are skipped (never passed) for this reason.
  std::string emulated, cannot_run;
  std::string architecture;  // the image's, set with `emulated`
};

// Runs each test in a fresh writable layer over `root`; GPU tests are
// skipped (never passed) when `env.gpu` is null, every test when
// `env.cannot_run` says why.
std::vector<TestResult> run_tests(sandbox::Sandbox& sandbox, const ImageRoot& root,
                                  const std::vector<ImageTest>& tests, const TestEnvironment& env);

}  // namespace sb::verify
