// Just enough ELF for the static checks: the dynamic section (NEEDED,
// RUNPATH, RPATH, SONAME), the class and machine, and the section table.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
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

// A read-only mapping of a whole file, with bounds-checked access: big
// libraries (libtorch_cuda.so is ~1 GB) are read in place, never copied.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& file);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }
  std::string_view bytes() const { return {data_, size_}; }
  // `len` bytes at `off`; throws sb::Error ("malformed ELF") past the end.
  std::string_view at(uint64_t off, uint64_t len) const;

 private:
  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

struct ElfSection {
  std::string name;
  uint32_t type = 0;    // SHT_PROGBITS, SHT_NOBITS, ...
  uint64_t flags = 0;   // SHF_ALLOC, SHF_EXECINSTR, ...
  uint64_t offset = 0;  // in the file
  uint64_t size = 0;    // in the file (0 for SHT_NOBITS)
};

// The section table of a mapped ELF file (empty when it has none, or is not
// ELF). Throws sb::Error when a header points past the end of the file.
std::vector<ElfSection> elf_sections(const MappedFile& file);

// True when the file starts with the ELF magic.
bool is_elf(const std::filesystem::path& file);

// Parses an ELF file; nullopt when it is not ELF. Throws sb::Error on a
// truncated or malformed one.
std::optional<ElfInfo> read_elf(const std::filesystem::path& file);

// The contents of the section called `name`, if the file has it (e.g. ".nv_fatbin").
std::optional<std::string> read_elf_section(const std::filesystem::path& file, const std::string& name);

}  // namespace sb::verify
