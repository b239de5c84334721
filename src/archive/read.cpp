#include "archive/read.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <array>
#include <cerrno>
#include <string_view>

#include "archive/gzip_stream.hpp"
#include "archive/libarchive.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

la_ssize_t read_callback(struct archive* a, void* fn, const void** buf) {
  try {
    return (*static_cast<ArchiveReader::ReadFn*>(fn))(buf);
  } catch (const std::exception& e) {  // never through libarchive's C frames
    archive_set_error(a, EIO, "%s", e.what());
    return -1;
  }
}

}  // namespace

ArchiveReader::ArchiveReader(const std::filesystem::path& file, unsigned formats, Filters filters,
                             std::string label)
    : label_(std::move(label)) {
  open_file(file, formats, filters, 1 << 16);
}

ArchiveReader::ArchiveReader(Memory memory, unsigned formats, Filters filters, std::string label)
    : label_(std::move(label)) {
  setup(formats, filters);
  opened(archive_read_open_memory(a_.get(), memory.bytes.data(), memory.bytes.size()));
}

ArchiveReader::ArchiveReader(ReadFn read, unsigned formats, Filters filters, std::string label)
    : label_(std::move(label)) {
  open_read(std::move(read), formats, filters);
}

void ArchiveReader::Free::operator()(struct archive* a) const {
  archive_read_free(a);
}

void ArchiveReader::setup(unsigned formats, Filters filters) {
  a_.reset(archive_read_new());
  if (!a_.get()) throw Error(label_ + ": libarchive: out of memory");
  if (formats & kTar) archive_read_support_format_tar(a_.get());
  if (formats & kZip) archive_read_support_format_zip(a_.get());
  if (formats & kAr) archive_read_support_format_ar(a_.get());
  if (formats & kRaw) archive_read_support_format_raw(a_.get());
  if (formats & kEmpty) archive_read_support_format_empty(a_.get());
  switch (filters) {
    case Filters::None:
      archive_read_support_filter_none(a_.get());
      break;
    case Filters::Zstd:
      archive_read_support_filter_none(a_.get());
      archive_read_support_filter_zstd(a_.get());
      break;
    case Filters::All:
      archive_read_support_filter_all(a_.get());
      break;
  }
}

void ArchiveReader::opened(int rc) {
  if (rc != ARCHIVE_OK) throw Error(label_ + ": " + archive_why(a_.get()));
}

void ArchiveReader::open_file(const std::filesystem::path& file, unsigned formats, Filters filters,
                              size_t block) {
  setup(formats, filters);
  opened(archive_read_open_filename(a_.get(), file.c_str(), block));
}

void ArchiveReader::open_read(ReadFn read, unsigned formats, Filters filters) {
  setup(formats, filters);
  read_ = std::make_unique<ReadFn>(std::move(read));
  opened(archive_read_open(a_.get(), read_.get(), nullptr, read_callback, nullptr));
}

ArchiveReader::ReadFn ArchiveReader::member_of(ArchiveReader& outer) {
  auto buf = std::make_shared<std::array<char, 1 << 16>>();
  return [&outer, buf](const void** out) -> ssize_t {
    la_ssize_t got = archive_read_data(outer.get(), buf->data(), buf->size());
    if (got < 0) throw Error(archive_why(outer.get()));
    *out = buf->data();
    return got;
  };
}

struct archive_entry* ArchiveReader::next() {
  struct archive_entry* e = nullptr;
  int rc = archive_read_next_header(a_.get(), &e);
  if (rc == ARCHIVE_EOF) return nullptr;
  if (rc == ARCHIVE_OK || (rc == ARCHIVE_WARN && !strict_)) return e;
  throw Error(label_ + ": " + archive_why(a_.get()));
}

std::string ArchiveReader::read_all(const std::string& what, uint64_t max,
                                    const std::string& max_text) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    la_ssize_t n = archive_read_data(a_.get(), buf, sizeof buf);
    if (n < 0) throw Error(what + ": " + archive_why(a_.get()));
    if (n == 0) break;
    if (out.size() + static_cast<uint64_t>(n) > max)
      throw Error(what + ": it is larger than " + max_text);
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

void ArchiveReader::read_blocks(const std::string& what,
                                const std::function<void(const void*, size_t, int64_t)>& block) {
  const void* buf;
  size_t len;
  la_int64_t offset;
  for (;;) {
    int rc = archive_read_data_block(a_.get(), &buf, &len, &offset);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) throw Error(what + ": " + archive_why(a_.get()));
    block(buf, len, offset);
  }
}

LayerReader::LayerReader(const std::filesystem::path& blob, bool raw, size_t ahead)
    : ArchiveReader("cannot read layer " + blob.string()) {
  const unsigned format = raw ? kRaw : kTar;
  if (GzipStream::is_gzip(blob)) {
    auto gzip = std::make_shared<GzipStream>(blob, "layer " + blob.string(), true, ahead);
    gzip_ = gzip;
    open_read(
        [gzip](const void** out) -> ssize_t {
          std::string_view chunk = gzip->next();
          *out = chunk.data();
          return static_cast<ssize_t>(chunk.size());
        },
        format, Filters::None);
  } else {
    open_file(blob, format, Filters::Zstd, 1 << 20);
  }
}

void LayerReader::set_ahead(size_t bytes) {
  if (gzip_) gzip_->set_ahead(bytes);
}

void LayerReader::read_to_end() {
  if (gzip_)
    while (!gzip_->next().empty()) {
    }
}

}  // namespace sb
