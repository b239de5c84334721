// Builds tar (and tar+gzip) files entry by entry for extractor tests,
// including entries no honest writer would produce.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <string>
#include <vector>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::test {

struct RawEntry {
  std::string path;
  char type = 'f';            // f file, d dir, l symlink, h hardlink, c char device
  std::string data;           // file content, or link target
  unsigned mode = 0644;
  int64_t declared_size = -1; // file size in the header; -1: data.size()
  std::vector<std::pair<std::string, std::string>> xattrs;  // name, value (pax headers)
};

// `gnu`: GNU tar's format, where names are bytes in the header as they are
// (pax, the default, writes a name that is not UTF-8 with hdrcharset=BINARY).
inline void make_tar(const fs::path& out, const std::vector<RawEntry>& entries, bool gzip = false, bool gnu = false) {
  struct archive* a = archive_write_new();
  if (gnu)
    archive_write_set_format_gnutar(a);
  else
    archive_write_set_format_pax_restricted(a);
  if (gzip) archive_write_add_filter_gzip(a);
  if (archive_write_open_filename(a, out.c_str()) != ARCHIVE_OK) throw Error("open fixture");
  for (const auto& r : entries) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_copy_pathname(e, r.path.c_str());
    archive_entry_set_perm(e, r.mode);
    archive_entry_set_mtime(e, 1000, 0);
    for (const auto& [name, value] : r.xattrs) archive_entry_xattr_add_entry(e, name.c_str(), value.data(), value.size());
    switch (r.type) {
      case 'd': archive_entry_set_filetype(e, AE_IFDIR); break;
      case 'l':
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_copy_symlink(e, r.data.c_str());
        break;
      case 'h':
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_copy_hardlink(e, r.data.c_str());
        break;
      case 'c':
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdevmajor(e, 1);
        archive_entry_set_rdevminor(e, 3);
        break;
      default:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, r.declared_size >= 0 ? r.declared_size : static_cast<int64_t>(r.data.size()));
    }
    archive_write_header(a, e);
    if (r.type == 'f' && r.declared_size < 0) archive_write_data(a, r.data.data(), r.data.size());
    if (r.type == 'f' && r.declared_size >= 0) {
      // Stream the declared size as zeros (a bomb compresses to almost nothing).
      std::string zeros(1 << 20, '\0');
      for (int64_t left = r.declared_size; left > 0; left -= static_cast<int64_t>(zeros.size()))
        archive_write_data(a, zeros.data(), std::min<int64_t>(left, zeros.size()));
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

}  // namespace sb::test
