#include "verify/fatbin.hpp"

#include <elf.h>
#include <string.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <fstream>

#include "util/error.hpp"
#include "verify/elf.hpp"

namespace sb::verify {

namespace {

// A container: {u32 magic, u16 version, u16 header size, u64 size of the
// entries}, followed by entries: {u16 kind, u16 version, u32 header size, u64
// padded payload size, ..., u32 sm at offset 28, ...}, each header followed by
// its payload.
constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint16_t kKindPtx = 1, kKindElf = 2;
constexpr size_t kContainerHeader = 16, kEntryMin = 32;

template <class T>
T load(std::string_view s, size_t off) {
  if (off > s.size() || sizeof(T) > s.size() - off)
    throw Error("malformed fat binary: entry past the end of .nv_fatbin");
  T v;
  std::memcpy(&v, s.data() + off, sizeof v);
  return v;
}

// Reads without bounds checks; the caller has checked.
template <class T>
T peek(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The size of the well-formed container at `c` (header and entries) with its
// code added to `code`, or 0 when the bytes there are not one. `avail` bytes
// may be read from `c`.
size_t checked_container(const char* c, size_t avail, GpuCode& code) {
  if (avail < kContainerHeader || peek<uint32_t>(c) != kFatbinMagic || peek<uint16_t>(c + 4) != 1 ||
      peek<uint16_t>(c + 6) != kContainerHeader)
    return 0;
  uint64_t size = peek<uint64_t>(c + 8);
  if (size == 0 || size % 8 != 0 || size > avail - kContainerHeader) return 0;
  GpuCode found;
  const char* p = c + kContainerHeader;
  const char* end = p + size;
  while (p < end) {
    size_t left = static_cast<size_t>(end - p);
    if (left < 64) return 0;  // every entry header nvcc writes is 64 bytes or more
    uint16_t kind = peek<uint16_t>(p);
    uint16_t version = peek<uint16_t>(p + 2);
    uint32_t header = peek<uint32_t>(p + 4);
    uint64_t payload = peek<uint64_t>(p + 8);
    if (kind == 0 || version != 0x0101 || header < 64 || header % 8 != 0 || header > left ||
        payload % 8 != 0 || payload > left - header)
      return 0;
    if (kind == kKindPtx || kind == kKindElf) {
      uint32_t sm = peek<uint32_t>(p + 28);
      if (sm < 10 || sm > 999) return 0;
      (kind == kKindElf ? found.sass : found.ptx).insert(static_cast<int>(sm));
    }
    p += header + payload;
  }
  code.merge(found);
  return kContainerHeader + size;
}

}  // namespace

void GpuCode::merge(const GpuCode& other) {
  sass.insert(other.sass.begin(), other.sass.end());
  ptx.insert(other.ptx.begin(), other.ptx.end());
}

GpuCode parse_fatbin(std::string_view sec) {
  GpuCode code;
  size_t pos = 0;
  while (pos + kContainerHeader <= sec.size()) {
    uint32_t magic = load<uint32_t>(sec, pos);
    if (magic != kFatbinMagic) {
      if (magic == 0) {  // padding between containers
        pos += 8;
        continue;
      }
      throw Error("malformed fat binary: bad magic at offset " + std::to_string(pos));
    }
    uint16_t header = load<uint16_t>(sec, pos + 6);
    uint64_t size = load<uint64_t>(sec, pos + 8);
    if (header < kContainerHeader || header > sec.size() - pos || size > sec.size() - pos - header)
      throw Error("malformed fat binary: container past the end of .nv_fatbin");
    size_t p = pos + header, end = pos + header + size;
    while (p + kEntryMin <= end) {
      uint16_t kind = load<uint16_t>(sec, p);
      uint32_t entry_header = load<uint32_t>(sec, p + 4);
      uint64_t payload = load<uint64_t>(sec, p + 8);
      uint32_t sm = load<uint32_t>(sec, p + 28);
      if (entry_header == 0) throw Error("malformed fat binary: empty entry header");
      if (payload > end - p - std::min<uint64_t>(entry_header, end - p))
        throw Error("malformed fat binary: entry past the end of its container");
      if (kind == kKindElf) code.sass.insert(static_cast<int>(sm));
      if (kind == kKindPtx) code.ptx.insert(static_cast<int>(sm));
      p += entry_header + payload;
    }
    pos = end;
  }
  return code;
}

GpuCode scan_embedded_fatbins(std::string_view bytes, size_t* containers) {
  GpuCode code;
  const char magic[4] = {0x50, static_cast<char>(0xED), 0x55, static_cast<char>(0xBA)};  // little-endian
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  while (p < end) {
    auto* hit = static_cast<const char*>(::memmem(p, static_cast<size_t>(end - p), magic, sizeof magic));
    if (!hit) break;
    if (size_t n = checked_container(hit, static_cast<size_t>(end - hit), code)) {
      if (containers) ++*containers;
      p = hit + n;
    } else {
      p = hit + 1;
    }
  }
  return code;
}

GpuCode gpu_code_of(const std::filesystem::path& elf) {
  MappedFile file(elf);
  GpuCode code;
  for (const auto& s : elf_sections(file)) {  // each within the file
    if (s.type == SHT_NOBITS || s.size == 0) continue;
    if (s.name == ".nv_fatbin") {
      try {
        code.merge(parse_fatbin(file.at(s.offset, s.size)));
      } catch (Error& e) {
        throw Error(elf.string() + ": " + e.what());
      }
    } else if (s.type == SHT_PROGBITS && (s.flags & SHF_ALLOC) && !(s.flags & SHF_EXECINSTR)) {
      code.merge(scan_embedded_fatbins(file.at(s.offset, s.size)));
    }
  }
  return code;
}

GpuCode gpu_code_of_file(const std::filesystem::path& file) {
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) throw_errno("stat " + file.string());
  if (S_ISDIR(st.st_mode)) throw Error(file.string() + ": is a directory (give the files in it)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_errno("open " + file.string());
  char head[8] = {};
  in.read(head, sizeof head);
  const std::string_view h(head, static_cast<size_t>(in.gcount()));
  if (h.starts_with("\x7f" "ELF")) return gpu_code_of(file);
  if (h.starts_with("!<arch>\n")) {  // each member object's .nv_fatbin holds whole containers
    MappedFile m(file);
    return scan_embedded_fatbins(m.bytes());
  }
  if (h.size() >= 4 && peek<uint32_t>(h.data()) == kFatbinMagic) {
    MappedFile m(file);
    try {
      return parse_fatbin(m.bytes());
    } catch (Error& e) {
      throw Error(file.string() + ": " + e.what());
    }
  }
  throw Error(file.string() + ": not an ELF file, a static library (ar archive) or a fat binary");
}

int sm_number(const std::string& cc) {
  size_t dot = cc.find('.');
  try {
    if (dot == std::string::npos || dot == 0 || dot + 2 != cc.size()) throw std::invalid_argument(cc);
    return std::stoi(cc.substr(0, dot)) * 10 + (cc[dot + 1] - '0');
  } catch (const std::exception&) {
    throw Error("bad compute capability '" + cc + "' (want MAJOR.MINOR, e.g. 8.6)", ErrorKind::Usage);
  }
}

bool runs_on(const GpuCode& code, int sm) {
  for (int s : code.sass)
    if (s / 10 == sm / 10 && s % 10 <= sm % 10) return true;
  for (int p : code.ptx)
    if (p <= sm) return true;
  return false;
}

}  // namespace sb::verify
