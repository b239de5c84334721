// Fuzz targets: every parser of input that comes from outside (recipes,
// archive indexes, index pages, registry documents, archives, ELF files).
//
// Each target is a function of bytes. All of them go into `fuzz_replay`,
// which CTest runs over tests/fuzz/corpus/NAME/ (the seeds and every input a
// fuzzer once found a fault with) in the default test run. Built with
// -DSTACKBUILD_FUZZ=ON (clang), each also becomes a libFuzzer binary
// `fuzz_NAME`, everything compiled with AddressSanitizer and UBSan.
// docs/testing.md says how to fuzz.
//
// A target may throw sb::Error: that is the answer to bad input. Anything
// else escaping (a json or std exception, a crash, a sanitizer report, a
// broken property such as "parses what it printed") is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.hpp"

namespace sb::fuzz {

using Target = void (*)(const uint8_t* data, size_t size);
bool register_target(const char* name, Target target);
Target find_target(const std::string& name);  // null when there is none
std::vector<std::string> target_names();

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `f`; an sb::Error is the expected answer to bad input.
template <class F>
bool expect_errors(F&& f) {
  try {
    f();
    return true;
  } catch (const sb::Error&) {
    return false;
  }
}

// A finding that is not a crash: a property of the parser does not hold.
[[noreturn]] void fail(const std::string& what);
inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// The input cut at lines "----" into `n` parts (missing parts are empty),
// for targets that take several documents.
std::vector<std::string> split(std::string_view input, size_t n);

// A scratch directory of this process, emptied before it is returned, for
// readers that take files.
const std::filesystem::path& fresh_scratch();
void write_file(const std::filesystem::path& path, std::string_view bytes);

}  // namespace sb::fuzz

// Defines the target `name` (a C identifier; also its corpus directory).
#define SB_FUZZ_TARGET(name)                                                  \
  static void sb_fuzz_##name(const uint8_t* data, size_t size);               \
  [[maybe_unused]] static const bool sb_fuzz_registered_##name =              \
      ::sb::fuzz::register_target(#name, sb_fuzz_##name);                     \
  static void sb_fuzz_##name(const uint8_t* data, size_t size)
