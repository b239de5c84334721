// The GPU code a CUDA binary carries: the entries of the fat binaries in its
// .nv_fatbin section, each SASS (an ELF cubin for one sm_XY) or PTX (for a
// virtual compute_XY, compiled by the driver at load time).
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace sb::verify {

struct GpuCode {
  std::set<int> sass;  // sm numbers: 80 = sm_80
  std::set<int> ptx;   // compute numbers: 90 = compute_90
  bool empty() const { return sass.empty() && ptx.empty(); }
};

// Parses the bytes of a .nv_fatbin section. Throws sb::Error when malformed.
GpuCode parse_fatbin(const std::string& section);

// The GPU code in an ELF file; empty when it has none.
GpuCode gpu_code_of(const std::filesystem::path& elf);

// "8.6" -> 86; throws on a malformed compute capability.
int sm_number(const std::string& compute_capability);

// Whether code for `sm` can run: SASS of the same major and a minor not above
// it (binary compatibility), or PTX of a compute version not above it (the
// driver compiles it).
bool runs_on(const GpuCode& code, int sm);

}  // namespace sb::verify
