// The libFuzzer entry of `fuzz_NAME` (-DSTACKBUILD_FUZZ=ON): the target whose
// name CMake compiled in as SB_FUZZ_NAME.
#include <cstdio>
#include <cstdlib>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const sb::fuzz::Target target = [] {
    sb::fuzz::Target t = sb::fuzz::find_target(SB_FUZZ_NAME);
    if (!t) {
      std::fprintf(stderr, "fuzz: no target %s\n", SB_FUZZ_NAME);
      std::abort();
    }
    return t;
  }();
  target(data, size);
  return 0;
}
