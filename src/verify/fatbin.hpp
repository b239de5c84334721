// The GPU code a CUDA binary carries: the entries of its fat binaries, each
// SASS (an ELF cubin for one sm_XY) or PTX (for a virtual compute_XY,
// compiled by the driver at load time). nvcc puts them in the .nv_fatbin
// section, registered with the CUDA runtime at load; some libraries (cuFFT,
// CUPTI) also carry fat binaries in their data sections and load those
// themselves, so both are read.
#pragma once

#include <cstddef>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace sb::verify {

struct GpuCode {
  std::set<int> sass;  // sm numbers: 80 = sm_80
  std::set<int> ptx;   // compute numbers: 90 = compute_90
  bool empty() const { return sass.empty() && ptx.empty(); }
  void merge(const GpuCode& other);
};

// Parses the bytes of a .nv_fatbin section. Throws sb::Error when malformed.
GpuCode parse_fatbin(std::string_view section);

// The fat binaries embedded anywhere in `bytes`: each place holding the fat
// binary magic is taken only when the whole container checks out (version 1,
// a 16-byte header, entries of version 0x0101 whose sizes chain exactly to
// its end, a plausible sm for SASS and PTX); anything else is skipped as
// data that happens to hold the magic. Entries of other kinds (LTO IR, ...)
// are skipped. `containers` counts the fat binaries taken.
GpuCode scan_embedded_fatbins(std::string_view bytes, size_t* containers = nullptr);

// The GPU code in an ELF file: its .nv_fatbin section's, and that of the fat
// binaries embedded in its other allocated data sections (not its code). A
// file without a .nv_fatbin section is scanned as well (CUPTI keeps its
// kernels in .data only). Empty when it has none. Throws sb::Error naming the
// file when its .nv_fatbin section is malformed.
GpuCode gpu_code_of(const std::filesystem::path& elf);

// The GPU code in any file that can carry it, told apart by its first bytes:
// an ELF file (gpu_code_of), a static library (ar archive: the fat binaries
// of its member objects), or a raw fat binary (nvcc --fatbin; must parse
// whole). Throws sb::Error naming the file when it is missing, a directory,
// none of these, or malformed. What `stackbuild cuda-code` lists.
GpuCode gpu_code_of_file(const std::filesystem::path& file);

// "8.6" -> 86; throws on a malformed compute capability.
int sm_number(const std::string& compute_capability);

// Whether code for `sm` can run: SASS of the same major and a minor not above
// it (binary compatibility), or PTX of a compute version not above it (the
// driver compiles it).
bool runs_on(const GpuCode& code, int sm);

}  // namespace sb::verify
