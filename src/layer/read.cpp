#include "layer/read.hpp"

#include <archive.h>

#include <cerrno>
#include <string_view>

#include "layer/gzip_stream.hpp"
#include "util/error.hpp"

namespace sb {

namespace {

la_ssize_t read_gzip(struct archive* a, void* stream, const void** buf) {
  try {
    std::string_view chunk = static_cast<GzipStream*>(stream)->next();
    *buf = chunk.data();
    return static_cast<la_ssize_t>(chunk.size());
  } catch (const std::exception& e) {  // never through libarchive's C frames
    archive_set_error(a, EIO, "%s", e.what());
    return -1;
  }
}

}  // namespace

LayerReader::LayerReader(const std::filesystem::path& blob, bool raw) : a_(archive_read_new()) {
  if (!a_) throw Error("libarchive: out of memory");
  if (raw)
    archive_read_support_format_raw(a_);
  else
    archive_read_support_format_tar(a_);
  archive_read_support_filter_none(a_);
  int rc;
  if (GzipStream::is_gzip(blob)) {
    try {
      gzip_ = std::make_unique<GzipStream>(blob, "layer " + blob.string());
    } catch (...) {
      archive_read_free(a_);
      throw;
    }
    rc = archive_read_open(a_, gzip_.get(), nullptr, read_gzip, nullptr);
  } else {
    archive_read_support_filter_zstd(a_);
    rc = archive_read_open_filename(a_, blob.c_str(), 1 << 20);
  }
  if (rc != ARCHIVE_OK) {
    std::string why = archive_error_string(a_) ? archive_error_string(a_) : "unreadable";
    archive_read_free(a_);
    throw Error("cannot read layer " + blob.string() + ": " + why);
  }
}

LayerReader::~LayerReader() { archive_read_free(a_); }  // before gzip_ goes

}  // namespace sb
