// Caps on what untrusted input may make stackbuild hold or write: a registry's
// manifest, an index page, a wheel's inflated members. Each has a default
// with wide headroom over real inputs and an environment variable that
// raises (or lowers) it, which every error at the cap names.
#pragma once

#include <cstdint>
#include <string>

namespace sb {

struct SizeLimit {
  uint64_t bytes = 0;
  const char* variable = "";  // the setting that changes it, e.g. STACKBUILD_REGISTRY_MAX_DOCUMENT
  // "the 4 MiB cap (STACKBUILD_REGISTRY_MAX_DOCUMENT raises it)"
  std::string describe() const;
};

// The cap `variable` sets ("64MiB", "1G", or bytes), else `fallback`. A
// malformed or zero value is an sb::Error naming the variable.
SizeLimit size_limit(const char* variable, uint64_t fallback);

namespace limits {
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
// A manifest, an image index or a token server's answer: real ones are a few KiB.
inline SizeLimit registry_document() { return size_limit("STACKBUILD_REGISTRY_MAX_DOCUMENT", 4 * kMiB); }
// A pip simple-index page: the largest real ones (projects with thousands of files) are a few MiB.
inline SizeLimit index_page() { return size_limit("STACKBUILD_INDEX_MAX_PAGE", 64 * kMiB); }
// An apt InRelease or Release file: Debian's is about 150 KiB.
inline SizeLimit apt_release() { return size_limit("STACKBUILD_APT_MAX_RELEASE", 16 * kMiB); }
// An apt Packages index, compressed as fetched or decompressed: the largest
// real ones (Debian main, Ubuntu universe for amd64) are under 100 MiB decompressed.
inline SizeLimit apt_index() { return size_limit("STACKBUILD_APT_MAX_INDEX", 512 * kMiB); }
// NVIDIA's redistrib_<version>.json: the CUDA toolkit's is a few hundred KiB.
inline SizeLimit redist_manifest() { return size_limit("STACKBUILD_REDIST_MAX_MANIFEST", 16 * kMiB); }
// All members of one wheel once inflated: NVIDIA's CUDA wheels are a few GiB.
inline SizeLimit wheel_inflated() { return size_limit("STACKBUILD_WHEEL_MAX_INFLATED", 32 * kGiB); }
}  // namespace limits

}  // namespace sb
