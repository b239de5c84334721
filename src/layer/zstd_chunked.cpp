#include "layer/zstd_chunked.hpp"

#include <zstd.h>

#include "layer/chunked_toc.hpp"
#include "layer/frames.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

constexpr unsigned char kSkippableMagic[4] = {0x50, 0x2a, 0x4d, 0x18};
constexpr unsigned char kChunkedMagic[8] = {0x47, 0x6e, 0x55, 0x6c,
                                            0x49, 0x6e, 0x55, 0x78};  // "GnUlInUx"
constexpr uint64_t kManifestTypeCrfs = 1;
// containers/storage refuses a manifest past 50 MiB, compressed or not.
constexpr uint64_t kManifestLimit = 50u << 20;

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>(v >> (8 * i));
}

void check(size_t rc) {
  if (ZSTD_isError(rc)) throw Error(std::string("zstd: ") + ZSTD_getErrorName(rc));
}

// One zstd frame of `in` at `out` (room for ZSTD_compressBound()): one
// thread, so the bytes are libzstd's single-threaded output at `level`, with
// the content checksum. Returns its size.
size_t zstd_frame(std::string_view in, int level, char* out) {
  struct Ctx {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ~Ctx() { ZSTD_freeCCtx(c); }
  };
  thread_local Ctx ctx;
  if (!ctx.c) throw Error("zstd: out of memory");
  ZSTD_CCtx_reset(ctx.c, ZSTD_reset_session_and_parameters);
  check(ZSTD_CCtx_setParameter(ctx.c, ZSTD_c_compressionLevel, level));
  check(ZSTD_CCtx_setParameter(ctx.c, ZSTD_c_checksumFlag, 1));
  size_t n = ZSTD_compress2(ctx.c, out, ZSTD_compressBound(in.size()), in.data(), in.size());
  check(n);
  return n;
}

std::string zstd_frame(std::string_view in, int level) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  out.resize(zstd_frame(in, level, out.data()));
  return out;
}

void skippable_frame(std::string& out, std::string_view data) {
  out.append(reinterpret_cast<const char*>(kSkippableMagic), 4);
  put_le(out, data.size(), 4);
  out.append(data);
}

class ZstdChunkedCompressor final : public Compressor, public EntryFramer {
 public:
  ZstdChunkedCompressor(const LayerOptions& o, Emit emit)
      : emit_(std::move(emit)),
        level_(o.level < 0 ? 3 : o.level),
        frames_(
            emit_, [this](std::string_view in, size_t, char* out) { return zstd_frame(in, level_, out); },
            [](size_t n) { return ZSTD_compressBound(n); }, o.threads),
        toc_(frames_, o.chunk_size, TocStyle{"zstd:chunked", true, true, false, false}) {
    if (level_ < 1 || level_ > ZSTD_maxCLevel())
      throw Error("zstd level " + std::to_string(level_) + " is not supported (1-" +
                  std::to_string(ZSTD_maxCLevel()) + ")");
  }

  void write(const char* data, size_t size) override { toc_.write(data, size); }

  void finish(const Tick& tick) override {
    frames_.drain(tick);
    nlohmann::json toc{{"version", 1}, {"entries", toc_.entries()}};
    std::string manifest = toc.dump();
    std::string compressed = zstd_frame(manifest, level_);
    if (manifest.size() > kManifestLimit || compressed.size() > kManifestLimit)
      throw Error("zstd:chunked: the layer's table of contents is " +
                  std::to_string(manifest.size() >> 20) +
                  " MiB, past the 50 MiB that containers/storage reads; split the layer");
    // The manifest's offset is that of its data, past the skippable frame's
    // 8-byte header.
    uint64_t offset = frames_.emitted() + 8;
    std::string tail;
    skippable_frame(tail, compressed);
    std::string footer;
    put_le(footer, offset, 8);
    put_le(footer, compressed.size(), 8);
    put_le(footer, manifest.size(), 8);
    put_le(footer, kManifestTypeCrfs, 8);
    footer.append(reinterpret_cast<const char*>(kChunkedMagic), 8);
    skippable_frame(tail, footer);
    emit_(tail.data(), tail.size());
    checksum_ = Digest::of_bytes(compressed).str();
    position_ = std::to_string(offset) + ":" + std::to_string(compressed.size()) + ":" +
                std::to_string(manifest.size()) + ":" + std::to_string(kManifestTypeCrfs);
  }

  uint64_t consumed() const override { return frames_.consumed(); }
  EntryFramer* framer() override { return this; }

  void describe(Layer& l) const override {
    l.annotations[kZstdChunkedChecksumAnnotation] = checksum_;
    l.annotations[kZstdChunkedPositionAnnotation] = position_;
  }

  std::vector<ExtraMember> leading_members(size_t) override { return {}; }
  void begin_entry(const std::string& name, const TarEntry& e) override {
    toc_.begin_entry(name, e);
  }
  void begin_payload() override { toc_.begin_payload(); }
  void end_payload() override { toc_.end_payload(); }
  std::vector<ExtraMember> closing_members() override { return {}; }

 private:
  Emit emit_;
  int level_;
  FrameWriter frames_;
  ChunkedToc toc_;
  std::string checksum_, position_;
};

}  // namespace

std::unique_ptr<Compressor> make_zstd_chunked_compressor(const LayerOptions& options, Emit emit) {
  return std::make_unique<ZstdChunkedCompressor>(options, std::move(emit));
}

}  // namespace sb
