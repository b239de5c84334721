#include "verify/elf.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::verify {

MappedFile::MappedFile(const std::filesystem::path& p) : path_(p.string()) {
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open " + path_);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_errno("stat " + path_);
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;
  void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (data == MAP_FAILED) throw_errno("mmap " + path_);
  data_ = static_cast<const char*>(data);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

std::string_view MappedFile::at(uint64_t off, uint64_t len) const {
  if (off > size_ || len > size_ - off) throw Error(path_ + ": malformed ELF (offset past the end)");
  return {data_ + off, static_cast<size_t>(len)};
}

namespace {

// Typed and C-string reads from a mapping.
struct Mapped {
  const MappedFile& f;
  size_t size() const { return f.size(); }
  const char* at(uint64_t off, uint64_t len) const { return f.at(off, len).data(); }
  template <class T>
  T get(uint64_t off) const {
    T v;
    std::memcpy(&v, at(off, sizeof v), sizeof v);
    return v;
  }
  std::string cstr(uint64_t off) const {
    const char* p = at(off, 1);
    size_t max = size() - off;
    return std::string(p, strnlen(p, max));
  }
};

std::vector<std::string> split_path(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Class-generic access to headers: Ehdr/Phdr/Shdr/Dyn of 32 or 64 bits.
template <class Ehdr, class Phdr, class Shdr, class Dyn>
struct Reader {
  const Mapped& m;

  Ehdr ehdr() const { return m.get<Ehdr>(0); }
  Phdr phdr(const Ehdr& e, int i) const { return m.get<Phdr>(e.e_phoff + static_cast<uint64_t>(i) * e.e_phentsize); }
  Shdr shdr(const Ehdr& e, int i) const { return m.get<Shdr>(e.e_shoff + static_cast<uint64_t>(i) * e.e_shentsize); }

  // File offset of a virtual address, through the PT_LOAD segments.
  uint64_t offset_of(const Ehdr& e, uint64_t vaddr) const {
    for (int i = 0; i < e.e_phnum; ++i) {
      Phdr p = phdr(e, i);
      if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr < p.p_vaddr + p.p_filesz)
        return vaddr - p.p_vaddr + p.p_offset;
    }
    throw Error("malformed ELF: address not in any segment");
  }

  ElfInfo info() const {
    ElfInfo out;
    Ehdr e = ehdr();
    out.is64 = sizeof(Ehdr) == sizeof(Elf64_Ehdr);
    out.machine = e.e_machine;
    out.type = e.e_type;
    Phdr dyn{};
    for (int i = 0; i < e.e_phnum; ++i) {
      Phdr p = phdr(e, i);
      if (p.p_type == PT_DYNAMIC) dyn = p, out.dynamic = true;
      if (p.p_type == PT_INTERP) out.interpreter = m.cstr(p.p_offset);
    }
    if (!out.dynamic) return out;
    std::vector<std::pair<int64_t, uint64_t>> entries;
    uint64_t strtab = 0;
    for (uint64_t off = dyn.p_offset; off + sizeof(Dyn) <= dyn.p_offset + dyn.p_filesz; off += sizeof(Dyn)) {
      Dyn d = m.get<Dyn>(off);
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_STRTAB) strtab = offset_of(e, d.d_un.d_ptr);
      entries.emplace_back(d.d_tag, d.d_un.d_val);
    }
    for (const auto& [tag, val] : entries) {
      if (tag == DT_NEEDED) out.needed.push_back(m.cstr(strtab + val));
      if (tag == DT_RUNPATH) out.runpath = split_path(m.cstr(strtab + val));
      if (tag == DT_RPATH) out.rpath = split_path(m.cstr(strtab + val));
      if (tag == DT_SONAME) out.soname = m.cstr(strtab + val);
    }
    return out;
  }

  std::vector<ElfSection> sections() const {
    Ehdr e = ehdr();
    std::vector<ElfSection> out;
    if (e.e_shoff == 0 || e.e_shstrndx == SHN_UNDEF || e.e_shstrndx >= e.e_shnum) return out;
    Shdr names = shdr(e, e.e_shstrndx);
    for (int i = 0; i < e.e_shnum; ++i) {
      Shdr s = shdr(e, i);
      ElfSection sec{m.cstr(names.sh_offset + s.sh_name), s.sh_type, s.sh_flags, s.sh_offset,
                     s.sh_type == SHT_NOBITS ? 0 : s.sh_size};
      m.at(sec.offset, sec.size);  // within the file
      out.push_back(std::move(sec));
    }
    return out;
  }
};

using Reader64 = Reader<Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr, Elf64_Dyn>;
using Reader32 = Reader<Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr, Elf32_Dyn>;

bool has_magic(const Mapped& m) { return m.size() >= EI_NIDENT && std::memcmp(m.at(0, 4), ELFMAG, SELFMAG) == 0; }

}  // namespace

bool is_elf(const std::filesystem::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  char magic[4];
  return fd.get() >= 0 && ::read(fd.get(), magic, 4) == 4 && std::memcmp(magic, ELFMAG, SELFMAG) == 0;
}

std::optional<ElfInfo> read_elf(const std::filesystem::path& file) {
  MappedFile f(file);
  Mapped m{f};
  if (!has_magic(m)) return std::nullopt;
  try {
    if (m.get<unsigned char>(EI_CLASS) == ELFCLASS64) return Reader64{m}.info();
    return Reader32{m}.info();
  } catch (Error& e) {
    throw Error(file.string() + ": " + e.what());
  }
}

std::vector<ElfSection> elf_sections(const MappedFile& file) {
  Mapped m{file};
  if (!has_magic(m)) return {};
  if (m.get<unsigned char>(EI_CLASS) == ELFCLASS64) return Reader64{m}.sections();
  return Reader32{m}.sections();
}

std::optional<std::string> read_elf_section(const std::filesystem::path& file, const std::string& name) {
  MappedFile f(file);
  for (const auto& s : elf_sections(f))
    if (s.name == name) return std::string(f.at(s.offset, s.size));
  return std::nullopt;
}

}  // namespace sb::verify
