// Reading archives with libarchive: every reader in the tree goes through
// ArchiveReader (layers, .debs and their members, redist and source
// archives and zips, compressed apt indexes), so that opening, the entry
// loop, its errors and data reads are written once.
//
// A layer blob (tar, tar+gzip or tar+zstd) has its own reader, LayerReader:
// a gzip blob is inflated by a GzipStream (ISA-L, on a thread of its own) and
// handed to libarchive as a plain tar; zstd and plain ones go to libarchive
// as they are.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

struct archive;
struct archive_entry;

namespace sb {

class GzipStream;

class ArchiveReader {
 public:
  // kRaw: the bytes as one entry; kEmpty: no bytes at all (after the filters) as no entry.
  enum Format : unsigned { kTar = 1, kZip = 2, kAr = 4, kRaw = 8, kEmpty = 16 };
  enum class Filters { None, Zstd, All };
  // Hands libarchive the next bytes of the archive: sets `out`, returns how
  // many (0 at the end, -1 after an error, with errno).
  using ReadFn = std::function<ssize_t(const void** out)>;
  struct Memory {
    std::string_view bytes;
  };

  // `label` starts every error ("x.deb: data.tar: <why>").
  ArchiveReader(const std::filesystem::path& file, unsigned formats, Filters filters,
                std::string label);
  ArchiveReader(Memory memory, unsigned formats, Filters filters, std::string label);
  ArchiveReader(ReadFn read, unsigned formats, Filters filters, std::string label);
  virtual ~ArchiveReader() = default;
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;

  // The data of `outer`'s current entry (an ar member, say) as a ReadFn, to
  // read it as an archive of its own while `outer` stays where it is.
  static ReadFn member_of(ArchiveReader& outer);

  // The next entry, or nullptr at the end. A broken archive throws
  // Error("<label>: <why>"); a warning (an unknown pax keyword, say) passes
  // unless `strict`.
  struct archive_entry* next();
  ArchiveReader& strict() {
    strict_ = true;
    return *this;
  }

  // The current entry's data, whole; past `max` bytes an Error says
  // "<what>: larger than <max_text>".
  std::string read_all(const std::string& what, uint64_t max = UINT64_MAX,
                       const std::string& max_text = "");
  // The current entry's data a block at a time, with each block's offset.
  void read_blocks(const std::string& what,
                   const std::function<void(const void*, size_t, int64_t)>& block);

  struct archive* get() const {
    return a_.get();
  }
  const std::string& label() const { return label_; }

 protected:
  explicit ArchiveReader(std::string label) : label_(std::move(label)) {}
  void open_file(const std::filesystem::path& file, unsigned formats, Filters filters,
                 size_t block);
  void open_read(ReadFn read, unsigned formats, Filters filters);

 private:
  void setup(unsigned formats, Filters filters);
  void opened(int rc);
  struct Free {
    void operator()(struct archive* a) const;
  };
  std::string label_;
  std::unique_ptr<ReadFn> read_;  // the callback form's: libarchive's client data (freed after a_)
  std::unique_ptr<struct archive, Free> a_;
  bool strict_ = false;
};

class LayerReader final : public ArchiveReader {
 public:
  // `raw`: the decompressed bytes as one entry instead of tar entries.
  // `ahead`: bytes a gzip blob's thread may inflate ahead of the reader
  // (0: a few MiB). Throws sb::Error naming the blob.
  explicit LayerReader(const std::filesystem::path& blob, bool raw = false, size_t ahead = 0);
  // Changes that bound (a gzip blob's; nothing for others).
  void set_ahead(size_t bytes);
  // After the tar's end: reads a gzip blob to its end, so that its last
  // member's CRC-32 and length are checked too (libarchive stops at the
  // end-of-archive blocks, before them). Throws sb::Error naming the blob.
  void read_to_end();

 private:
  std::shared_ptr<GzipStream> gzip_;
};

}  // namespace sb
