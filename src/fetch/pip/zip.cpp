#include "fetch/pip/zip.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "util/error.hpp"
#include "util/interrupt.hpp"
#include "util/utf8.hpp"

namespace sb::pip {

namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint16_t kFlagEncrypted = 0x0001;
constexpr uint16_t kFlagStrongEncryption = 0x0040;
constexpr uint16_t kFlagUtf8 = 0x0800;
constexpr uint16_t kSystemDos = 0;
constexpr uint16_t kSystemUnix = 3;

uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t le32(const unsigned char* p) { return static_cast<uint32_t>(le16(p)) | static_cast<uint32_t>(le16(p + 2)) << 16; }
uint64_t le64(const unsigned char* p) { return static_cast<uint64_t>(le32(p)) | static_cast<uint64_t>(le32(p + 4)) << 32; }

// Code points of bytes 0x80-0xFF in code page 437 (IBM PC), which zip names
// without the UTF-8 flag are in.
constexpr uint16_t kCp437High[128] = {
    0x00C7, 0x00FC, 0x00E9, 0x00E2, 0x00E4, 0x00E0, 0x00E5, 0x00E7, 0x00EA, 0x00EB, 0x00E8, 0x00EF, 0x00EE,
    0x00EC, 0x00C4, 0x00C5, 0x00C9, 0x00E6, 0x00C6, 0x00F4, 0x00F6, 0x00F2, 0x00FB, 0x00F9, 0x00FF, 0x00D6,
    0x00DC, 0x00A2, 0x00A3, 0x00A5, 0x20A7, 0x0192, 0x00E1, 0x00ED, 0x00F3, 0x00FA, 0x00F1, 0x00D1, 0x00AA,
    0x00BA, 0x00BF, 0x2310, 0x00AC, 0x00BD, 0x00BC, 0x00A1, 0x00AB, 0x00BB, 0x2591, 0x2592, 0x2593, 0x2502,
    0x2524, 0x2561, 0x2562, 0x2556, 0x2555, 0x2563, 0x2551, 0x2557, 0x255D, 0x255C, 0x255B, 0x2510, 0x2514,
    0x2534, 0x252C, 0x251C, 0x2500, 0x253C, 0x255E, 0x255F, 0x255A, 0x2554, 0x2569, 0x2566, 0x2560, 0x2550,
    0x256C, 0x2567, 0x2568, 0x2564, 0x2565, 0x2559, 0x2558, 0x2552, 0x2553, 0x256B, 0x256A, 0x2518, 0x250C,
    0x2588, 0x2584, 0x258C, 0x2590, 0x2580, 0x03B1, 0x00DF, 0x0393, 0x03C0, 0x03A3, 0x03C3, 0x00B5, 0x03C4,
    0x03A6, 0x0398, 0x03A9, 0x03B4, 0x221E, 0x03C6, 0x03B5, 0x2229, 0x2261, 0x00B1, 0x2265, 0x2264, 0x2320,
    0x2321, 0x00F7, 0x2248, 0x00B0, 0x2219, 0x00B7, 0x221A, 0x207F, 0x00B2, 0x25A0, 0x00A0};

std::string cp437_to_utf8(std::string_view in) {
  std::string out;
  for (unsigned char c : in) {
    append_utf8(out, c < 0x80 ? c : kCp437High[c - 0x80]);
  }
  return out;
}

// The st_mode libarchive reports for a member, from the system that made the
// archive and its external attributes.
uint32_t member_mode(uint16_t made_by, uint32_t external, const std::string& name) {
  uint32_t mode = 0;
  if (made_by >> 8 == kSystemUnix) {
    mode = external >> 16;
  } else if (made_by >> 8 == kSystemDos) {
    mode = (external & 0x10) ? (S_IFDIR | 0775) : (S_IFREG | 0664);
    if (external & 0x01) mode &= ~0222u;  // read-only
  }
  if ((mode & S_IFMT) == S_IFIFO) mode = (mode & ~S_IFMT) | S_IFREG;  // Info-ZIP stored a pipe's stat
  if ((mode & S_IFMT) == 0) {
    bool dir = !name.empty() && name.back() == '/';
    mode |= dir ? S_IFDIR : S_IFREG;
    if ((mode & 07777) == 0) mode |= dir ? 0775 : 0664;
  }
  return mode;
}

}  // namespace

bool ZipMember::directory() const { return S_ISDIR(mode) || (!name.empty() && name.back() == '/'); }
bool ZipMember::regular() const { return S_ISREG(mode) && !directory(); }

void ZipReader::fail(const std::string& what) const { throw Error(label_ + ": " + what); }

void ZipReader::pread_exact(void* buf, size_t n, uint64_t offset, const std::string& what) const {
  if (offset > file_size_ || n > file_size_ - offset) fail(what + " lies past the end of the file (truncated?)");
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd_.get(), p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_errno(label_ + ": read");
    if (r == 0) fail(what + " lies past the end of the file (truncated?)");
    p += r, n -= static_cast<size_t>(r), offset += static_cast<uint64_t>(r);
  }
}

// The local header must say what the central directory says of the member:
// a reader that trusts one and an extractor that trusts the other (pip reads
// the central directory too, others stream local headers) must see one
// archive. Sets the member's data offset.
void ZipReader::check_local_header(ZipMember& m) const {
  const std::string who = "'" + m.name + "'";
  if (m.flags & (kFlagEncrypted | kFlagStrongEncryption)) fail(who + " is encrypted");
  if (m.method != 0 && m.method != 8)
    fail(who + " uses compression method " + std::to_string(m.method) + " (wheels use 0, stored, or 8, deflate)");
  unsigned char local[30];
  pread_exact(local, sizeof local, m.local_offset, who + "'s local header");
  if (le32(local) != kLocalHeader) fail(who + " has no local header at offset " + std::to_string(m.local_offset));
  uint16_t flags = le16(local + 6);
  if (flags & (kFlagEncrypted | kFlagStrongEncryption)) fail(who + " is encrypted");
  size_t name_len = le16(local + 26), extra_len = le16(local + 28);
  std::string names(name_len + extra_len, '\0');
  pread_exact(names.data(), names.size(), m.local_offset + 30, who + "'s local header");
  auto differs = [&](const std::string& what, const std::string& local_value, const std::string& central_value) {
    fail(who + ": the local header gives " + what + " " + local_value + ", the central directory " + central_value);
  };
  // The name as the local header's own flags say to read it.
  std::string local_name = names.substr(0, name_len);
  if (!(flags & kFlagUtf8)) local_name = cp437_to_utf8(local_name);
  else if (!valid_utf8(local_name)) fail(who + "'s local header has a name that is not UTF-8");
  if (local_name != m.name) differs("the name", "'" + local_name + "'", "'" + m.name + "'");
  if (le16(local + 8) != m.method)
    differs("compression method", std::to_string(le16(local + 8)), std::to_string(m.method));
  uint32_t crc = le32(local + 14);
  uint64_t compressed = le32(local + 18), size = le32(local + 22);
  const auto* x = reinterpret_cast<const unsigned char*>(names.data() + name_len);
  for (size_t k = 0; k + 4 <= extra_len;) {  // zip64: the saturated sizes, uncompressed first
    uint16_t id = le16(x + k), len = le16(x + k + 2);
    if (k + 4 + len > extra_len) fail(who + " has a corrupt extra field in its local header");
    if (id == 0x0001) {
      const unsigned char* f = x + k + 4;
      size_t left = len;
      for (uint64_t* field : {&size, &compressed}) {
        if (*field != 0xFFFFFFFF) continue;
        if (left < 8) fail(who + " has a short zip64 extra field in its local header");
        *field = le64(f);
        f += 8, left -= 8;
      }
    }
    k += 4 + len;
  }
  // With a data descriptor (flag bit 3) the local fields may be left zero.
  bool descriptor = flags & 0x0008;
  if (crc != m.crc && !(descriptor && crc == 0)) differs("CRC-32", std::to_string(crc), std::to_string(m.crc));
  if (compressed != m.compressed && !(descriptor && compressed == 0))
    differs("a compressed size of", std::to_string(compressed), std::to_string(m.compressed));
  if (size != m.size && !(descriptor && size == 0)) differs("a size of", std::to_string(size), std::to_string(m.size));
  m.data_offset = m.local_offset + 30 + name_len + extra_len;
  if (m.data_offset > file_size_ || m.compressed > file_size_ - m.data_offset)
    fail(who + " (" + std::to_string(m.compressed) + " bytes at " + std::to_string(m.data_offset) +
         ") lies past the end of the file (truncated?)");
}

ZipReader::ZipReader(const fs::path& file, std::string label, SizeLimit max_inflated, Check check)
    : label_(std::move(label)), check_(check) {
  fd_ = UniqueFd(open_waiting(file.c_str(), O_RDONLY | O_CLOEXEC, 0));
  if (fd_.get() < 0) throw_errno("open " + file.string());
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) throw_errno("stat " + file.string());
  file_size_ = static_cast<uint64_t>(st.st_size);

  // The end of central directory record: 22 bytes and a comment of up to 64 KiB.
  if (file_size_ < 22) fail("not a zip file (" + std::to_string(file_size_) + " bytes)");
  size_t tail_size = static_cast<size_t>(std::min<uint64_t>(file_size_, 22 + 0xFFFF));
  std::vector<unsigned char> tail(tail_size);
  uint64_t tail_at = file_size_ - tail_size;
  pread_exact(tail.data(), tail_size, tail_at, "the end of the archive");
  size_t eocd = std::string::npos;
  for (size_t i = tail_size - 22 + 1; i-- > 0;)
    if (le32(&tail[i]) == kEndOfDirectory && i + 22 + le16(&tail[i + 20]) <= tail_size) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) fail("not a zip file (no end of central directory record)");
  const unsigned char* e = &tail[eocd];
  uint64_t eocd_at = tail_at + eocd;
  uint64_t entries = le16(e + 10);
  uint64_t cd_size = le32(e + 12);
  uint64_t cd_offset = le32(e + 16);
  if (le16(e + 4) != 0 || le16(e + 6) != 0 || le16(e + 8) != le16(e + 10)) fail("a multi-disk archive");
  uint64_t cd_end_limit = eocd_at;
  // zip64: a locator right before the record points at the zip64 record.
  if (eocd_at >= 20) {
    unsigned char loc[20];
    pread_exact(loc, sizeof loc, eocd_at - 20, "the zip64 locator");
    if (le32(loc) == kZip64Locator) {
      uint64_t z64_at = le64(loc + 8);
      if (le32(loc + 4) != 0 || le32(loc + 16) > 1) fail("a multi-disk archive");
      unsigned char z[56];
      pread_exact(z, sizeof z, z64_at, "the zip64 end of central directory record");
      if (le32(z) != kZip64End) fail("the zip64 locator points at no zip64 record");
      if (le32(z + 16) != 0 || le32(z + 20) != 0 || le64(z + 24) != le64(z + 32)) fail("a multi-disk archive");
      entries = le64(z + 32);
      cd_size = le64(z + 40);
      cd_offset = le64(z + 48);
      cd_end_limit = z64_at;
    }
  }
  if (cd_offset > cd_end_limit || cd_size > cd_end_limit - cd_offset)
    fail("the central directory (" + std::to_string(cd_size) + " bytes at " + std::to_string(cd_offset) +
         ") does not fit before its end record");
  if (entries > cd_size / 46) fail("the central directory is too small for its " + std::to_string(entries) + " entries");
  std::vector<unsigned char> cd(static_cast<size_t>(cd_size));
  pread_exact(cd.data(), cd.size(), cd_offset, "the central directory");

  size_t pos = 0;
  members_.reserve(static_cast<size_t>(entries));
  for (uint64_t i = 0; i < entries; ++i) {
    if (cd.size() - pos < 46 || le32(&cd[pos]) != kCentralHeader)
      fail("central directory entry " + std::to_string(i + 1) + " of " + std::to_string(entries) + " is corrupt");
    const unsigned char* h = &cd[pos];
    size_t name_len = le16(h + 28), extra_len = le16(h + 30), comment_len = le16(h + 32);
    if (cd.size() - pos - 46 < name_len + extra_len + comment_len)
      fail("central directory entry " + std::to_string(i + 1) + " runs past the directory");
    ZipMember m;
    m.flags = le16(h + 8);
    m.method = le16(h + 10);
    m.crc = le32(h + 16);
    m.compressed = le32(h + 20);
    m.size = le32(h + 24);
    m.local_offset = le32(h + 42);
    std::string_view raw(reinterpret_cast<const char*>(h + 46), name_len);
    if (m.flags & kFlagUtf8) {
      if (!valid_utf8(raw)) fail("member " + std::to_string(i + 1) + " has a name that is not UTF-8");
      m.name = std::string(raw);
    } else {
      m.name = cp437_to_utf8(raw);
    }
    // zip64: the fields saturated at 0xFFFFFFFF follow, in this order, in extra field 0x0001.
    const unsigned char* x = h + 46 + name_len;
    for (size_t k = 0; k + 4 <= extra_len;) {
      uint16_t id = le16(x + k), len = le16(x + k + 2);
      if (k + 4 + len > extra_len) fail("'" + m.name + "' has a corrupt extra field");
      if (id == 0x0001) {
        const unsigned char* f = x + k + 4;
        size_t left = len;
        for (uint64_t* field : {&m.size, &m.compressed, &m.local_offset}) {
          if (*field != 0xFFFFFFFF) continue;
          if (left < 8) fail("'" + m.name + "' has a short zip64 extra field");
          *field = le64(f);
          f += 8, left -= 8;
        }
      }
      k += 4 + len;
    }
    m.mode = member_mode(le16(h + 4), le32(h + 38), m.name);
    if (check_ == Check::Whole) check_local_header(m);
    members_.push_back(std::move(m));
    pos += 46 + name_len + extra_len + comment_len;
  }
  std::stable_sort(members_.begin(), members_.end(),
                   [](const ZipMember& a, const ZipMember& b) { return a.local_offset < b.local_offset; });
  // Before anything is inflated: each member's bytes its own, and the sizes
  // declared in all under the cap. Sizes are checked again while inflating.
  uint64_t total = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    const ZipMember& m = members_[i];
    uint64_t end = m.data_offset + m.compressed;  // both checked against the file's size
    uint64_t next = i + 1 < members_.size() ? members_[i + 1].local_offset : cd_offset;
    if (check_ == Check::Whole && end > next)
      fail("'" + m.name + "' (bytes " + std::to_string(m.local_offset) + " to " + std::to_string(end) +
           ") overlaps " + (i + 1 < members_.size() ? "'" + members_[i + 1].name + "'" : "the central directory") +
           " (at " + std::to_string(next) + "); a zip whose members share bytes is refused (a zip bomb's shape)");
    total = m.size > UINT64_MAX - total ? UINT64_MAX : total + m.size;
    if (total > max_inflated.bytes)
      fail("the members declare " + (total == UINT64_MAX ? "more than 2^64" : std::to_string(total)) +
           " bytes once inflated (as far as '" + m.name + "'), over " + max_inflated.describe());
  }
}

ZipReader::~ZipReader() = default;

void ZipReader::read(const ZipMember& member, const std::function<void(const char*, size_t)>& out) const {
  // The constructor checked the member's local header and where its data
  // lies, unless it read the directory only: then it is checked now.
  ZipMember m = member;
  if (check_ == Check::DirectoryOnly) check_local_header(m);
  const std::string who = "'" + m.name + "'";
  uint64_t data_at = m.data_offset;
  if (m.method == 0 && m.compressed != m.size)
    fail(who + " is stored with " + std::to_string(m.compressed) + " bytes for a size of " + std::to_string(m.size));

  // One set of buffers and one inflate state per reader: a wheel holds
  // thousands of members, most of them small.
  if (!in_) in_ = std::make_unique<unsigned char[]>(kChunk), out_ = std::make_unique<unsigned char[]>(kChunk);
  unsigned char* in = in_.get();
  uint64_t left = m.compressed, at = data_at, produced = 0;
  uint32_t crc = 0;
  if (m.method == 0) {
    while (left > 0) {
      check_interrupted();
      size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunk));
      pread_exact(in, n, at, who);
      crc = crc32_gzip_refl(crc, in, n);
      out(reinterpret_cast<const char*>(in), n);
      left -= n, at += n, produced += n;
    }
  } else {
    if (!state_) state_ = std::make_unique<inflate_state>();
    inflate_state* state = state_.get();
    isal_inflate_init(state);
    state->crc_flag = ISAL_GZIP_NO_HDR;  // raw deflate, with the CRC-32 of what comes out
    unsigned char* buf = out_.get();
    while (state->block_state != ISAL_BLOCK_FINISH) {
      check_interrupted();
      if (state->avail_in == 0 && left > 0) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunk));
        pread_exact(in, n, at, who);
        state->next_in = in;
        state->avail_in = static_cast<uint32_t>(n);
        left -= n, at += n;
      }
      state->next_out = buf;
      state->avail_out = kChunk;
      int rc = isal_inflate(state);
      if (rc < 0) fail(who + ": corrupt deflate data (ISA-L error " + std::to_string(rc) + ")");
      size_t n = kChunk - state->avail_out;
      produced += n;
      if (produced > m.size)
        fail(who + " inflates to more than the " + std::to_string(m.size) + " bytes the archive gives");
      if (n) out(reinterpret_cast<const char*>(buf), n);
      if (n == 0 && state->avail_in == 0 && left == 0 && state->block_state != ISAL_BLOCK_FINISH)
        fail(who + ": the deflate stream ends early (truncated?)");
    }
    crc = state->crc;
  }
  if (produced != m.size)
    fail(who + " inflates to " + std::to_string(produced) + " bytes, not the " + std::to_string(m.size) +
         " the archive gives");
  if (crc != m.crc) fail(who + " fails its CRC-32 check (corrupt)");
}

}  // namespace sb::pip
