// libarchive for apt/: decompressing indexes and reading .deb files.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "apt/deb.hpp"
#include "apt/repository.hpp"
#include "layer/libarchive.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/limits.hpp"

namespace sb::apt {

namespace {

struct ReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ReadPtr = std::unique_ptr<archive, ReadDeleter>;

ReadPtr raw_reader() {
  ReadPtr a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_raw(a.get());
  return a;
}

std::string read_all(archive* a, const std::string& what) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    la_ssize_t n = archive_read_data(a, buf, sizeof buf);
    if (n < 0) throw Error(what + ": " + archive_why(a));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// A tar inside the ar archive, read as a stream from the outer archive.
struct Nested {
  archive* outer;
  char buf[1 << 16];
};

la_ssize_t nested_read(archive*, void* ud, const void** out) {
  auto* n = static_cast<Nested*>(ud);
  la_ssize_t got = archive_read_data(n->outer, n->buf, sizeof n->buf);
  *out = n->buf;
  return got;
}

ReadPtr tar_reader() {
  ReadPtr a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  return a;
}

std::string clean_path(const char* raw) {
  std::string p = raw ? raw : "";
  return canonical_archive_path(p);  // throws on ".."
}

void read_control_tar(archive* outer, const std::string& what, DebContents& out) {
  Nested n{outer, {}};
  ReadPtr a = tar_reader();
  if (archive_read_open(a.get(), &n, nullptr, nested_read, nullptr) != ARCHIVE_OK)
    throw Error(what + ": control.tar: " + archive_why(a.get()));
  archive_entry* e;
  int r;
  while ((r = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK) {
    if (archive_entry_filetype(e) != AE_IFREG) continue;
    std::string name = clean_path(archive_entry_pathname(e));
    out.control_files[name] = read_all(a.get(), what + ": control.tar: " + name);
  }
  if (r != ARCHIVE_EOF) throw Error(what + ": control.tar: " + archive_why(a.get()));
  auto it = out.control_files.find("control");
  if (it == out.control_files.end()) throw Error(what + ": control.tar has no control file");
  auto ps = parse_paragraphs(it->second);
  if (ps.empty()) throw Error(what + ": an empty control file");
  out.control = ps.front();
  out.control_files.erase(it);
}

std::atomic<uint64_t> g_staged{0};

void read_data_tar(archive* outer, const std::string& what, const fs::path& staging, int64_t epoch,
                   DebContents& out) {
  Nested n{outer, {}};
  ReadPtr a = tar_reader();
  if (archive_read_open(a.get(), &n, nullptr, nested_read, nullptr) != ARCHIVE_OK)
    throw Error(what + ": data.tar: " + archive_why(a.get()));
  archive_entry* e;
  int r;
  std::map<std::string, fs::path> staged;  // archive path -> staging file (for hardlinks)
  while ((r = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK) {
    std::string path = clean_path(archive_entry_pathname(e));
    out.paths.push_back(path.empty() ? "/." : "/" + path);
    if (path.empty()) continue;
    TarEntry t;
    t.mode = archive_entry_perm(e) & 07777;
    t.uid = static_cast<uint32_t>(archive_entry_uid(e));
    t.gid = static_cast<uint32_t>(archive_entry_gid(e));
    t.mtime = std::min<int64_t>(archive_entry_mtime(e), epoch);
    if (const char* hl = archive_entry_hardlink(e)) {
      std::string target = clean_path(hl);
      auto it = staged.find(target);
      if (it == staged.end()) throw Error(what + ": hardlink " + path + " to " + target + ", which is not a file before it");
      struct stat st;
      if (::stat(it->second.c_str(), &st) != 0) throw_errno("stat " + it->second.string());
      t.type = TarEntry::Type::File;
      t.source = it->second;
      t.size = static_cast<uint64_t>(st.st_size);
      t.host_dev = st.st_dev, t.host_ino = st.st_ino;
      out.entries[target].host_dev = st.st_dev, out.entries[target].host_ino = st.st_ino;
      out.entries[path] = t;
      continue;
    }
    switch (archive_entry_filetype(e)) {
      case AE_IFDIR: t.type = TarEntry::Type::Dir; break;
      case AE_IFLNK:
        t.type = TarEntry::Type::Symlink;
        t.mode = 0777;
        t.link = archive_entry_symlink(e) ? archive_entry_symlink(e) : "";
        break;
      case AE_IFCHR: case AE_IFBLK:
        t.type = archive_entry_filetype(e) == AE_IFCHR ? TarEntry::Type::CharDev : TarEntry::Type::BlockDev;
        t.dev_major = archive_entry_rdevmajor(e);
        t.dev_minor = archive_entry_rdevminor(e);
        break;
      case AE_IFIFO: t.type = TarEntry::Type::Fifo; break;
      case AE_IFREG: {
        t.type = TarEntry::Type::File;
        fs::path dst = staging / ("f" + std::to_string(g_staged++));
        // Scratch files: no fsync, the layer blob written from them is what counts.
        UniqueFd f(::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
        if (f.get() < 0) throw_errno("create " + dst.string());
        char buf[1 << 16];
        for (;;) {
          la_ssize_t got = archive_read_data(a.get(), buf, sizeof buf);
          if (got < 0) throw Error(what + ": data.tar: " + path + ": " + archive_why(a.get()));
          if (got == 0) break;
          write_all(f.get(), buf, static_cast<size_t>(got), dst.string());
          t.size += static_cast<uint64_t>(got);
        }
        t.source = dst;
        staged[path] = dst;
        break;
      }
      default:
        throw Error(what + ": data.tar: " + path + " has an unsupported type");
    }
    out.entries[path] = std::move(t);
  }
  if (r != ARCHIVE_EOF) throw Error(what + ": data.tar: " + archive_why(a.get()));
}

}  // namespace

std::string decompress(const std::string& data, const std::string& name) {
  if (!name.ends_with(".xz") && !name.ends_with(".gz")) return data;
  ReadPtr a = raw_reader();
  if (archive_read_open_memory(a.get(), data.data(), data.size()) != ARCHIVE_OK)
    throw Error(name + ": " + archive_why(a.get()));
  archive_entry* e;
  if (archive_read_next_header(a.get(), &e) != ARCHIVE_OK) throw Error(name + ": " + archive_why(a.get()));
  // An index is held in memory: a small file that decompresses to gigabytes is refused at the cap.
  const SizeLimit cap = limits::apt_index();
  std::string out;
  char buf[1 << 16];
  for (;;) {
    la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
    if (n < 0) throw Error("decompressing " + name + ": " + archive_why(a.get()));
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > cap.bytes)
      throw Error("decompressing " + name + ": it is larger than " + cap.describe());
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

DebContents read_deb(const fs::path& deb, const fs::path& staging, int64_t epoch) {
  std::string what = deb.filename().string();
  ReadPtr a(archive_read_new());
  archive_read_support_format_ar(a.get());
  if (archive_read_open_filename(a.get(), deb.c_str(), 1 << 16) != ARCHIVE_OK)
    throw Error(what + ": not a .deb (" + archive_why(a.get()) + ")");
  DebContents out;
  bool have_control = false, have_data = false;
  archive_entry* e;
  int r;
  while ((r = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    if (name.rfind("control.tar", 0) == 0) read_control_tar(a.get(), what, out), have_control = true;
    else if (name.rfind("data.tar", 0) == 0) read_data_tar(a.get(), what, staging, epoch, out), have_data = true;
  }
  if (r != ARCHIVE_EOF) throw Error(what + ": not a .deb (" + archive_why(a.get()) + ")");
  if (!have_control || !have_data) throw Error(what + ": not a .deb (no control.tar or data.tar member)");
  return out;
}

}  // namespace sb::apt
