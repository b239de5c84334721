#include "verify/fatbin.hpp"

#include <cstdint>
#include <cstring>

#include "util/error.hpp"
#include "verify/elf.hpp"

namespace sb::verify {

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint16_t kKindPtx = 1, kKindElf = 2;

template <class T>
T load(const std::string& s, size_t off) {
  if (off + sizeof(T) > s.size()) throw Error("malformed fat binary: entry past the end of .nv_fatbin");
  T v;
  std::memcpy(&v, s.data() + off, sizeof v);
  return v;
}

}  // namespace

GpuCode parse_fatbin(const std::string& sec) {
  // A sequence of containers: {u32 magic, u16 version, u16 header size, u64
  // size of the entries}, each followed by entries: {u16 kind, u16 version,
  // u32 header size, u32 padded payload size, ..., u32 sm at offset 28, ...}.
  GpuCode code;
  size_t pos = 0;
  while (pos + 16 <= sec.size()) {
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
    size_t p = pos + header, end = pos + header + size;
    if (end > sec.size()) throw Error("malformed fat binary: container past the end of .nv_fatbin");
    while (p + 32 <= end) {
      uint16_t kind = load<uint16_t>(sec, p);
      uint32_t entry_header = load<uint32_t>(sec, p + 4);
      uint32_t payload = load<uint32_t>(sec, p + 8);
      uint32_t sm = load<uint32_t>(sec, p + 28);
      if (entry_header == 0) throw Error("malformed fat binary: empty entry header");
      if (kind == kKindElf) code.sass.insert(static_cast<int>(sm));
      if (kind == kKindPtx) code.ptx.insert(static_cast<int>(sm));
      p += entry_header + payload;
    }
    pos = end;
  }
  return code;
}

GpuCode gpu_code_of(const std::filesystem::path& elf) {
  auto sec = read_elf_section(elf, ".nv_fatbin");
  if (!sec || sec->empty()) return {};
  try {
    return parse_fatbin(*sec);
  } catch (Error& e) {
    throw Error(elf.string() + ": " + e.what());
  }
}

int sm_number(const std::string& cc) {
  size_t dot = cc.find('.');
  try {
    if (dot == std::string::npos || dot == 0 || dot + 2 != cc.size()) throw std::invalid_argument(cc);
    return std::stoi(cc.substr(0, dot)) * 10 + (cc[dot + 1] - '0');
  } catch (const std::exception&) {
    throw Error("bad compute capability '" + cc + "' (want MAJOR.MINOR, e.g. 8.6)", kExitUsage);
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
