// A wheel's zip archive, read through its central directory with each member
// inflated by ISA-L, 2.4 times zlib's speed (what libarchive uses; a torch
// wheel holds a 1 GB library, which one thread inflates while the others wait).
//
// Stored (0) and deflated (8) members, as the wheel format allows, with zip64
// sizes and offsets. Member names are UTF-8 when the archive says so (flag
// bit 11), else CP437, as Python's zipfile (and so pip) reads them. Every
// member's size and CRC-32 are checked as it is read. An encrypted member,
// another method, a multi-disk archive, a member outside the file or a
// corrupt stream is an error naming the archive and the member.
//
// A wheel is untrusted input, so the central directory is checked whole
// before anything is inflated: each member's local header must agree with it
// (name, method, and the CRC-32 and sizes unless a data descriptor follows),
// no two members' bytes may overlap (a quadratic zip bomb points many
// entries at one compressed body), and the sizes declared in all must stay
// under a cap (limits::wheel_inflated(), STACKBUILD_WHEEL_MAX_INFLATED).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/file.hpp"
#include "util/limits.hpp"

struct inflate_state;

namespace sb::pip {

namespace fs = std::filesystem;

struct ZipMember {
  std::string name;         // as stored (UTF-8), not yet checked as a path
  uint16_t method = 0;      // 0 stored, 8 deflated
  uint16_t flags = 0;
  uint64_t compressed = 0;  // bytes in the archive
  uint64_t size = 0;        // bytes once inflated
  uint64_t local_offset = 0;
  uint64_t data_offset = 0;  // where the compressed bytes start, past the local header
  uint32_t crc = 0;
  uint32_t mode = 0;  // st_mode: the type and permissions a Unix-made archive records, else a guess

  bool directory() const;
  bool regular() const;
  bool executable() const { return (mode & 0111) != 0; }
};

class ZipReader {
 public:
  // Whole: the central directory and every local header are checked when
  // the archive is opened (as above). DirectoryOnly: the central directory
  // (and the cap) only, and each member's local header when it is read: for
  // a sparse file holding only the directory and the members read (a wheel's
  // METADATA read by range requests, which reads no other member).
  enum class Check { Whole, DirectoryOnly };

  // Reads and checks the archive as `check` says. `label` names the archive
  // in errors ("wheel torch-2.7.0-....whl").
  ZipReader(const fs::path& file, std::string label, SizeLimit max_inflated = limits::wheel_inflated(),
            Check check = Check::Whole);
  ~ZipReader();

  // In the order of their data in the file (as libarchive gives them).
  const std::vector<ZipMember>& members() const { return members_; }

  // Streams the member's bytes to `out` in chunks, then checks the size and
  // CRC-32 the central directory gives.
  void read(const ZipMember& m, const std::function<void(const char*, size_t)>& out) const;

 private:
  [[noreturn]] void fail(const std::string& what) const;
  void pread_exact(void* buf, size_t n, uint64_t offset, const std::string& what) const;
  void check_local_header(ZipMember& m) const;

  static constexpr size_t kChunk = 1 << 18;

  UniqueFd fd_;
  uint64_t file_size_ = 0;
  std::string label_;
  std::vector<ZipMember> members_;
  Check check_ = Check::Whole;
  // read()'s buffers and inflate state, made on first use (read() is const:
  // one reader is not shared between threads).
  mutable std::unique_ptr<unsigned char[]> in_, out_;
  mutable std::unique_ptr<inflate_state> state_;
};

}  // namespace sb::pip
