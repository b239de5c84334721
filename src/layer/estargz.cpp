#include "layer/estargz.hpp"

#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>

#include "layer/chunked_toc.hpp"
#include "layer/frames.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

// RFC 1952 header: no name, mtime 0, no extra flags, OS unknown.
constexpr unsigned char kGzipHeader[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};

// Room for one gzip member of `n` bytes: the header, deflate (which never
// grows data by more than 5 bytes per 64 KiB stored block) and the trailer.
size_t gzip_member_bound(size_t n) { return sizeof kGzipHeader + n + n / 1024 + 1024; }

// ISA-L 2.30's deflate gives some inputs another (valid) encoding depending
// on the address of its isal_zstream: a member of a few hundred bytes about
// once in 250 addresses, seen as an eStargz layer whose bytes changed from
// run to run (address-space randomisation moves the stream on a worker's
// stack; found with a program that compressed one input with the stream at
// 3,000 random addresses; the input's, output's and level buffer's addresses
// do not matter). So the streams live at fixed addresses: kStreamSlots of
// them in a region mapped at kStreamRegion, frame N compressed with slot
// N % kStreamSlots. The bytes then depend on the input and the frame's number
// alone, whatever the thread and the process. Where the region cannot be
// mapped there (the address is taken), ordinary memory serves, and the bytes
// may differ in rare members from a run that had it.
constexpr uintptr_t kStreamRegion = 0x5bd000000000;
constexpr size_t kStreamSlots = 64;
constexpr size_t kStreamSlotSize = 128 << 10;
static_assert(sizeof(isal_zstream) <= kStreamSlotSize);

struct StreamSlots {
  char* base = nullptr;
  std::mutex locks[kStreamSlots];
  StreamSlots() {
    void* p = ::mmap(reinterpret_cast<void*>(kStreamRegion), kStreamSlots * kStreamSlotSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || reinterpret_cast<uintptr_t>(p) != kStreamRegion) {
      if (p != MAP_FAILED) ::munmap(p, kStreamSlots * kStreamSlotSize);  // a kernel without NOREPLACE took it as a hint
      p = ::mmap(nullptr, kStreamSlots * kStreamSlotSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw_errno("mmap for the estargz compressor's streams");
    }
    base = static_cast<char*>(p);
  }
};

StreamSlots& stream_slots() {
  static StreamSlots slots;  // never unmapped: workers may outlive a static destructor
  return slots;
}

// One whole gzip member of `in` (frame number `frame`) at `out`, with ISA-L
// at `level` (the same bytes on every x86-64 CPU with SSE4.2:
// blob_writer.cpp). Returns its size.
size_t gzip_member(std::string_view in, size_t frame, int level, char* out) {
  size_t level_size = level == 1   ? ISAL_DEF_LVL1_DEFAULT
                      : level == 2 ? ISAL_DEF_LVL2_DEFAULT
                      : level == 3 ? ISAL_DEF_LVL3_DEFAULT
                                   : 0;
  thread_local std::unique_ptr<char[]> level_buf;
  thread_local size_t level_buf_size = 0;
  if (level_buf_size < level_size) {
    level_buf.reset(new char[level_size]);
    level_buf_size = level_size;
  }
  std::memcpy(out, kGzipHeader, sizeof kGzipHeader);
  size_t room = gzip_member_bound(in.size()) - sizeof kGzipHeader;
  StreamSlots& slots = stream_slots();
  const size_t slot = frame % kStreamSlots;
  std::lock_guard lock(slots.locks[slot]);
  isal_zstream& s = *new (slots.base + slot * kStreamSlotSize) isal_zstream{};
  isal_deflate_init(&s);
  s.level = static_cast<uint32_t>(level);
  s.level_buf = level_size ? reinterpret_cast<uint8_t*>(level_buf.get()) : nullptr;
  s.level_buf_size = static_cast<uint32_t>(level_size);
  s.gzip_flag = IGZIP_GZIP_NO_HDR;  // the deflate data and the CRC-32/size trailer
  s.end_of_stream = 1;
  s.flush = NO_FLUSH;
  s.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(in.data()));
  s.avail_in = static_cast<uint32_t>(in.size());
  s.next_out = reinterpret_cast<uint8_t*>(out + sizeof kGzipHeader);
  s.avail_out = static_cast<uint32_t>(room);
  int rc = isal_deflate(&s);
  if (rc != COMP_OK || s.internal_state.state != ZSTATE_END)
    throw Error("ISA-L deflate failed (" + std::to_string(rc) + ")");
  return sizeof kGzipHeader + room - s.avail_out;
}

class EstargzCompressor final : public Compressor, public EntryFramer {
 public:
  EstargzCompressor(const LayerOptions& o, Emit emit)
      : emit_(std::move(emit)),
        prefetch_(o.prefetch),
        level_(o.level < 0 ? 2 : o.level),
        frames_(
            emit_, [this](std::string_view in, size_t frame, char* out) { return gzip_member(in, frame, level_, out); },
            gzip_member_bound, o.threads),
        toc_(frames_, o.chunk_size, TocStyle{"estargz", false, false, true}) {
    if (level_ > 3)
      throw Error("estargz level " + std::to_string(level_) +
                  " is not supported (ISA-L levels 0-3)");
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("sse4.2"))
      throw Error(
          "this CPU lacks SSE4.2, on which estargz layers would not be bit-identical to those "
          "built "
          "elsewhere; use --compression zstd:chunked (identical on every x86-64 CPU)");
#endif
  }

  void write(const char* data, size_t size) override {
    if (closing_)
      frames_.write(data, size);  // the TOC member: one gzip member, never cut
    else
      toc_.write(data, size);
  }

  void finish(const Tick& tick) override {
    if (!closing_)
      throw Error("internal: an estargz layer is written from tar entries, through its framer");
    frames_.drain(tick);
    std::string footer = estargz_footer(frames_.offset_of(toc_frame_));
    emit_(footer.data(), footer.size());
  }

  uint64_t consumed() const override {
    return frames_.consumed();
  }
  EntryFramer* framer() override {
    return this;
  }

  void describe(Layer& l) const override {
    l.annotations[kEstargzTocDigestAnnotation] = toc_digest_;
    l.annotations[kEstargzUncompressedSizeAnnotation] = std::to_string(l.uncompressed_size);
  }

  // The prefetch order (docs/partial-pulls.md): the files the image's tests
  // opened go first, then the prefetch landmark, up to which the stargz
  // snapshotter fetches the layer at once. A layer without any of them says
  // so with the no-prefetch landmark, first, as the estargz library writes it.
  const std::vector<std::string>& prioritized() const override { return prefetch_; }
  std::vector<ExtraMember> leading_members(size_t prioritized) override {
    if (prioritized) return {};
    return {{kEstargzNoPrefetchLandmark, kLandmarkContent}};
  }
  std::vector<ExtraMember> after_prioritized() override {
    return {{kEstargzPrefetchLandmark, kLandmarkContent}};
  }

  void begin_entry(const std::string& name, const TarEntry& e) override {
    if (closing_) {
      // The TOC entry starts the member that the footer points at.
      toc_frame_ = frames_.cut();
      return;
    }
    if (name == kEstargzTocName)
      throw Error("the layer holds a file named " + std::string(kEstargzTocName) +
                  " at its root, which is the name of eStargz's table of contents; use another "
                  "compression");
    toc_.begin_entry(name, e);
  }
  void begin_payload() override {
    if (!closing_) toc_.begin_payload();
  }
  void end_payload() override {
    if (!closing_) toc_.end_payload();
  }

  std::vector<ExtraMember> closing_members() override {
    frames_.drain();  // every offset and digest known
    nlohmann::json toc{{"version", 1}, {"entries", toc_.entries()}};
    std::string text = toc.dump(1, '\t');
    toc_digest_ = Digest::of_bytes(text).str();
    closing_ = true;
    return {{kEstargzTocName, std::move(text)}};
  }

 private:
  static constexpr const char* kLandmarkContent = "\x0f";  // the estargz library's
  Emit emit_;
  std::vector<std::string> prefetch_;
  int level_;
  FrameWriter frames_;
  ChunkedToc toc_;
  bool closing_ = false;
  size_t toc_frame_ = 0;
  std::string toc_digest_;
};

}  // namespace

std::string estargz_footer(uint64_t toc_offset) {
  // A gzip member with no content whose extra field (RFC 1952 2.3.1.1) has
  // one subfield "SG": the TOC's offset as 16 hex digits, then "STARGZ".
  char sub[23];
  std::snprintf(sub, sizeof sub, "%016llxSTARGZ", static_cast<unsigned long long>(toc_offset));
  std::string f(reinterpret_cast<const char*>(kGzipHeader), sizeof kGzipHeader);
  f[3] = 4;  // FEXTRA
  f += std::string{26, 0, 'S', 'G', 22, 0};
  f.append(sub, 22);
  f += std::string{1, 0, 0, '\xff', '\xff'};  // the last block, stored, empty
  f += std::string(8, '\0');                  // CRC-32 and size of nothing
  if (f.size() != 51)
    throw Error("internal: estargz footer of " + std::to_string(f.size()) + " bytes");
  return f;
}

std::unique_ptr<Compressor> make_estargz_compressor(const LayerOptions& options, Emit emit) {
  return std::make_unique<EstargzCompressor>(options, std::move(emit));
}

}  // namespace sb
