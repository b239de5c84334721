#include "layer/tar_writer.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <set>

#include "archive/utf8_locale.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/interrupt.hpp"
#include "util/utf8.hpp"

namespace sb {

namespace {

struct WriteContext {
  ByteSink* sink;
  std::exception_ptr error;
};

// libarchive calls this with output blocks. No exception may cross into C.
la_ssize_t on_write(struct archive*, void* ctx, const void* buf, size_t len) {
  auto* c = static_cast<WriteContext*>(ctx);
  try {
    c->sink->write(buf, len);
    return static_cast<la_ssize_t>(len);
  } catch (...) {
    c->error = std::current_exception();
    return -1;
  }
}

bool utf8_names(struct archive_entry* e) {
  for (const char* name : {archive_entry_pathname(e), archive_entry_symlink(e), archive_entry_hardlink(e)})
    if (name && !valid_utf8(name)) return false;
  return true;
}

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveDeleter>;
using EntryPtr = std::unique_ptr<struct archive_entry, EntryDeleter>;

class TarOut {
 public:
  explicit TarOut(ByteSink& sink) : ctx_{&sink, nullptr}, a_(archive_write_new()) {
    if (!a_) throw Error("libarchive: out of memory");
    archive_write_set_format_pax_restricted(a_.get());
    // No blocking (the bytes are the same): a sink that frames entries must
    // have every byte before an entry boundary when it is told of it, and
    // every sink gathers blocks of its own, so libarchive's 64 KiB blocks
    // were one more copy of the whole stream on the tar thread.
    archive_write_set_bytes_per_block(a_.get(), 0);
    archive_write_set_bytes_in_last_block(a_.get(), 1);  // no padding past the end-of-archive blocks
    if (archive_write_open2(a_.get(), &ctx_, nullptr, on_write, nullptr, nullptr) != ARCHIVE_OK) fail("open");
  }

  void header(struct archive_entry* e, const std::string& path) {
    int rc = archive_write_header(a_.get(), e);
    // Names are bytes: one that is not UTF-8 (a base image's file that a
    // step deletes, a file in a source tree) has no pax form, and libarchive
    // warns and writes that entry's names as they are, with hdrcharset=BINARY
    // (POSIX's word that they are bytes). Any other warning is a failure.
    if (rc == ARCHIVE_WARN && !utf8_names(e)) return;
    if (rc < ARCHIVE_OK) fail("write header of '" + printable_utf8(path) + "'");
  }
  void data(const void* buf, size_t len, const std::string& path) {
    if (archive_write_data(a_.get(), buf, len) < 0) fail("write '" + path + "'");
  }
  // Writes the padding of the entry before, so that what follows is the next header.
  void finish_entry() {
    if (archive_write_finish_entry(a_.get()) != ARCHIVE_OK) fail("finish an entry");
  }
  void close() {
    if (archive_write_close(a_.get()) != ARCHIVE_OK) fail("finish");
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    if (ctx_.error) std::rethrow_exception(ctx_.error);
    const char* msg = archive_error_string(a_.get());
    throw Error("tar: " + what + ": " + (msg ? msg : "libarchive error"));
  }
  Utf8Locale locale_;  // before a_: pax names are translated while it lives
  WriteContext ctx_;
  ArchivePtr a_;
};

void copy_content(TarOut& out, const fs::path& src, uint64_t expected, const std::string& path,
                  std::string& buf, uint64_t& done, const ProgressFn& progress) {
  UniqueFd fd(::open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) throw_errno("open " + src.string());
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  uint64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + src.string());
    }
    if (n == 0) break;
    check_interrupted();
    total += static_cast<uint64_t>(n);
    if (total > expected) break;
    out.data(buf.data(), static_cast<size_t>(n), path);
    done += static_cast<uint64_t>(n);
    if (progress) progress(done);
  }
  if (total != expected)
    throw Error(src.string() + " changed while it was being archived (size " + std::to_string(expected) +
                ", now " + std::to_string(total) + ")");
}

// The entries a framing format adds (eStargz's landmark and TOC): regular
// files, 0644, mtime 0, owned by root.
void write_members(TarOut& out, EntryFramer& framer, struct archive_entry* e,
                   const std::vector<ExtraMember>& members) {
  for (const auto& m : members) {
    TarEntry t;
    t.size = m.data.size();
    out.finish_entry();
    framer.begin_entry(m.name, t);
    archive_entry_clear(e);
    archive_entry_copy_pathname(e, m.name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, t.mode);
    archive_entry_set_mtime(e, 0, 0);
    archive_entry_set_size(e, static_cast<la_int64_t>(t.size));
    out.header(e, m.name);
    if (t.size) {
      framer.begin_payload();
      out.data(m.data.data(), m.data.size(), m.name);
      framer.end_payload();
    }
  }
}

using EntryRef = const EntryMap::value_type*;

constexpr const char* kOpaqueWhiteout = ".wh..wh..opq";

// The order of the entries in the stream: byte order of path, but the paths
// in `first` that the layer holds come before all others, in their order,
// each after what it needs to be extracted: its parent directories (with an
// opaque whiteout of one right after it, so that no extractor applies it to
// an entry of this layer) and, for a hard link, its target. `n_first`: how
// many entries that puts first.
std::vector<EntryRef> entry_order(const EntryMap& entries, const std::vector<std::string>& first, size_t& n_first) {
  std::vector<EntryRef> order;
  order.reserve(entries.size());
  std::set<EntryRef> placed;
  auto place = [&](EntryRef e) {
    if (placed.insert(e).second) order.push_back(e);
  };
  auto place_dir = [&](const std::string& dir) {  // "" is the root, which has no entry
    if (auto d = entries.find(dir); d != entries.end()) place(&*d);
    if (auto o = entries.find(dir.empty() ? kOpaqueWhiteout : dir + "/" + kOpaqueWhiteout); o != entries.end())
      place(&*o);
  };
  auto place_with_needs = [&](EntryRef e) {
    const std::string& path = e->first;
    place_dir("");
    for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1))
      place_dir(path.substr(0, slash));
    place(e);
  };
  for (const auto& p : first) {
    auto it = entries.find(p);
    if (it == entries.end() || placed.count(&*it)) continue;
    if (it->second.type == TarEntry::Type::Hardlink)
      if (auto target = entries.find(it->second.link); target != entries.end()) place_with_needs(&*target);
    place_with_needs(&*it);
  }
  n_first = order.size();
  for (const auto& entry : entries) place(&entry);
  return order;
}

}  // namespace

void write_canonical_tar(const EntryMap& entries, ByteSink& sink, const ProgressFn& progress) {
  TarOut out(sink);
  EntryFramer* framer = sink.framer();
  EntryPtr e(archive_entry_new());
  std::string buf(1 << 20, '\0');
  uint64_t done = 0;
  size_t n_first = 0;
  const std::vector<EntryRef> order =
      entry_order(entries, framer ? framer->prioritized() : std::vector<std::string>{}, n_first);
  if (framer) write_members(out, *framer, e.get(), framer->leading_members(n_first));
  for (size_t i = 0; i <= order.size(); ++i) {
    if (framer && n_first && i == n_first) {
      out.finish_entry();
      write_members(out, *framer, e.get(), framer->after_prioritized());
    }
    if (i == order.size()) break;
    const auto& [path, t] = *order[i];
    check_interrupted();
    bool dir_entry = t.type == TarEntry::Type::Dir;
    if (framer) {
      out.finish_entry();
      framer->begin_entry(dir_entry ? path + "/" : path, t);
    }
    archive_entry_clear(e.get());
    bool dir = dir_entry;
    archive_entry_copy_pathname(e.get(), dir ? (path + "/").c_str() : path.c_str());
    archive_entry_set_uid(e.get(), t.uid);
    archive_entry_set_gid(e.get(), t.gid);
    archive_entry_set_mtime(e.get(), t.mtime, 0);
    unsigned filetype = AE_IFREG;
    switch (t.type) {
      case TarEntry::Type::File: filetype = AE_IFREG; break;
      case TarEntry::Type::Hardlink: filetype = AE_IFREG; break;
      case TarEntry::Type::Dir: filetype = AE_IFDIR; break;
      case TarEntry::Type::Symlink: filetype = AE_IFLNK; break;
      case TarEntry::Type::CharDev: filetype = AE_IFCHR; break;
      case TarEntry::Type::BlockDev: filetype = AE_IFBLK; break;
      case TarEntry::Type::Fifo: filetype = AE_IFIFO; break;
    }
    archive_entry_set_filetype(e.get(), filetype);
    archive_entry_set_perm(e.get(), t.mode & 07777);
    if (t.type == TarEntry::Type::File) archive_entry_set_size(e.get(), static_cast<la_int64_t>(t.size));
    if (t.type == TarEntry::Type::Symlink) archive_entry_copy_symlink(e.get(), t.link.c_str());
    if (t.type == TarEntry::Type::Hardlink) {
      archive_entry_copy_hardlink(e.get(), t.link.c_str());
      archive_entry_set_size(e.get(), 0);
    }
    if (t.type == TarEntry::Type::CharDev || t.type == TarEntry::Type::BlockDev) {
      archive_entry_set_rdevmajor(e.get(), t.dev_major);
      archive_entry_set_rdevminor(e.get(), t.dev_minor);
    }
    for (const auto& [name, value] : t.xattrs)
      archive_entry_xattr_add_entry(e.get(), name.c_str(), value.data(), value.size());
    out.header(e.get(), path);
    if (t.type == TarEntry::Type::File && t.size > 0) {
      if (framer) framer->begin_payload();
      copy_content(out, t.source, t.size, path, buf, done, progress);
      if (framer) framer->end_payload();
    }
  }
  if (framer) {
    out.finish_entry();
    write_members(out, *framer, e.get(), framer->closing_members());
  }
  out.close();
}

void write_plain_tar(const std::vector<TarMember>& members, ByteSink& sink) {
  TarOut out(sink);
  EntryPtr e(archive_entry_new());
  std::string buf(1 << 20, '\0');
  uint64_t done = 0;
  for (const auto& m : members) {
    archive_entry_clear(e.get());
    archive_entry_copy_pathname(e.get(), m.name.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_mtime(e.get(), 0, 0);
    uint64_t size = m.source.empty() ? m.data.size() : fs::file_size(m.source);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    out.header(e.get(), m.name);
    if (m.source.empty())
      out.data(m.data.data(), m.data.size(), m.name);
    else
      copy_content(out, m.source, size, m.name, buf, done, {});
  }
  out.close();
}

void FdSink::write(const void* data, size_t size) { write_all(fd_, data, size, what_); }

}  // namespace sb
