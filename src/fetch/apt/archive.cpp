// libarchive for apt/: decompressing indexes and reading .deb files.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "fetch/apt/deb.hpp"
#include "fetch/apt/repository.hpp"
#include "archive/libarchive.hpp"
#include "archive/read.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/limits.hpp"

namespace sb::apt {

namespace {

// An entry's path in canonical form; a bad one (a '..', a NUL) is an error
// naming `where` (the .deb and its member).
std::string clean_path(const char* raw, const std::string& where) {
  try {
    return canonical_archive_path(raw ? raw : "");
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

void read_control_tar(ArchiveReader& outer, const std::string& what, DebContents& out) {
  ArchiveReader a(ArchiveReader::member_of(outer), ArchiveReader::kTar, ArchiveReader::Filters::All,
                  what + ": control.tar");
  a.strict();
  while (archive_entry* e = a.next()) {
    if (archive_entry_filetype(e) != AE_IFREG) continue;
    std::string name = clean_path(archive_entry_pathname(e), a.label());
    out.control_files[name] = a.read_all(what + ": control.tar: " + name);
  }
  auto it = out.control_files.find("control");
  if (it == out.control_files.end()) throw Error(what + ": control.tar has no control file");
  auto ps = parse_paragraphs(it->second);
  if (ps.empty()) throw Error(what + ": an empty control file");
  out.control = ps.front();
  out.control_files.erase(it);
}

std::atomic<uint64_t> g_staged{0};

void read_data_tar(ArchiveReader& outer, const std::string& what, const fs::path& staging, int64_t epoch,
                   DebContents& out) {
  ArchiveReader a(ArchiveReader::member_of(outer), ArchiveReader::kTar, ArchiveReader::Filters::All,
                  what + ": data.tar");
  a.strict();
  std::map<std::string, fs::path> staged;  // archive path -> staging file (for hardlinks)
  while (archive_entry* e = a.next()) {
    std::string path = clean_path(archive_entry_pathname(e), a.label());
    out.paths.push_back(path.empty() ? "/." : "/" + path);
    if (path.empty()) continue;
    TarEntry t;
    t.mode = archive_entry_perm(e) & 07777;
    t.uid = static_cast<uint32_t>(archive_entry_uid(e));
    t.gid = static_cast<uint32_t>(archive_entry_gid(e));
    t.mtime = std::min<int64_t>(archive_entry_mtime(e), epoch);
    if (const char* hl = archive_entry_hardlink(e)) {
      std::string target = clean_path(hl, a.label());
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
}

}  // namespace

std::string decompress(const std::string& data, const std::string& name) {
  if (!name.ends_with(".xz") && !name.ends_with(".gz")) return data;
  // An empty component's index is a compressed empty file: no entry, no packages.
  ArchiveReader a(ArchiveReader::Memory{data}, ArchiveReader::kRaw | ArchiveReader::kEmpty, ArchiveReader::Filters::All,
                  name);
  a.strict();
  if (!a.next()) return "";
  // An index is held in memory: a small file that decompresses to gigabytes is refused at the cap.
  const SizeLimit cap = limits::apt_index();
  return a.read_all("decompressing " + name, cap.bytes, cap.describe());
}

DebContents read_deb(const fs::path& deb, const fs::path& staging, int64_t epoch) {
  std::string what = deb.filename().string();
  ArchiveReader a(deb, ArchiveReader::kAr, ArchiveReader::Filters::None, what + ": not a .deb");
  a.strict();
  DebContents out;
  bool have_control = false, have_data = false;
  while (archive_entry* e = a.next()) {
    std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    if (name.rfind("control.tar", 0) == 0) read_control_tar(a, what, out), have_control = true;
    else if (name.rfind("data.tar", 0) == 0) read_data_tar(a, what, staging, epoch, out), have_data = true;
  }
  if (!have_control || !have_data) throw Error(what + ": not a .deb (no control.tar or data.tar member)");
  return out;
}

}  // namespace sb::apt
