// Just enough ELF for the static checks: the dynamic section (NEEDED,
// RUNPATH, RPATH, SONAME), the class and machine, and a named section's bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sb::verify {

struct ElfInfo {
  bool is64 = true;
  uint16_t machine = 0;      // EM_X86_64, EM_AARCH64, ...
  uint16_t type = 0;         // ET_EXEC, ET_DYN, ...
  bool dynamic = false;      // has a PT_DYNAMIC segment
  std::string interpreter;   // PT_INTERP, e.g. /lib64/ld-linux-x86-64.so.2
  std::vector<std::string> needed;
  std::vector<std::string> runpath, rpath;  // split on ':'
  std::string soname;
};

// True when the file starts with the ELF magic.
bool is_elf(const std::filesystem::path& file);

// Parses an ELF file; nullopt when it is not ELF. Throws sb::Error on a
// truncated or malformed one.
std::optional<ElfInfo> read_elf(const std::filesystem::path& file);

// The contents of the section called `name`, if the file has it (e.g. ".nv_fatbin").
std::optional<std::string> read_elf_section(const std::filesystem::path& file, const std::string& name);

}  // namespace sb::verify
