#include "layer/tree.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>

#include "util/error.hpp"

namespace sb {

namespace {

bool keep_xattr(const std::string& name) {
  // overlayfs's own bookkeeping in a user namespace (origin, impure, opaque:
  // the sandbox's upper directories) is never the image's.
  if (name.rfind("user.overlay.", 0) == 0) return false;
  if (name.rfind("user.", 0) == 0) return true;
  if (name == "security.capability") return true;
  return false;  // security.selinux, system.* (ACLs), trusted.* belong to the host
}

std::vector<std::pair<std::string, std::string>> read_xattrs(const fs::path& p) {
  std::vector<std::pair<std::string, std::string>> out;
  ssize_t len = ::llistxattr(p.c_str(), nullptr, 0);
  if (len <= 0) return out;
  std::string names(static_cast<size_t>(len), '\0');
  len = ::llistxattr(p.c_str(), names.data(), names.size());
  if (len <= 0) return out;
  for (size_t i = 0; i < static_cast<size_t>(len);) {
    std::string name(names.c_str() + i);
    i += name.size() + 1;
    if (!keep_xattr(name)) continue;
    ssize_t vlen = ::lgetxattr(p.c_str(), name.c_str(), nullptr, 0);
    if (vlen < 0) continue;
    std::string value(static_cast<size_t>(vlen), '\0');
    vlen = ::lgetxattr(p.c_str(), name.c_str(), value.data(), value.size());
    if (vlen < 0) continue;
    value.resize(static_cast<size_t>(vlen));
    out.emplace_back(std::move(name), std::move(value));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "/" + name;
}

uint32_t canonical_mode(const struct stat& st, const ScanOptions& o) {
  uint32_t mode = st.st_mode & 07777;
  if (!o.normalize_modes) return mode;
  if (S_ISDIR(st.st_mode) || (st.st_mode & 0111)) return 0755;
  return 0644;
}

// One host object -> one entry (no recursion).
std::optional<TarEntry> make_entry(const fs::path& src, const struct stat& st, const ScanOptions& o) {
  TarEntry e;
  e.mode = canonical_mode(st, o);
  e.mtime = std::min<int64_t>(st.st_mtim.tv_sec, o.source_date_epoch);
  if (o.preserve_owner) e.uid = st.st_uid, e.gid = st.st_gid;
  if (o.uid) e.uid = *o.uid;
  if (o.gid) e.gid = *o.gid;
  if (S_ISREG(st.st_mode)) {
    e.type = TarEntry::Type::File;
    e.size = static_cast<uint64_t>(st.st_size);
    e.source = src;
  } else if (S_ISDIR(st.st_mode)) {
    e.type = TarEntry::Type::Dir;
  } else if (S_ISLNK(st.st_mode)) {
    e.type = TarEntry::Type::Symlink;
    e.mode = 0777;
    std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
    ssize_t n = ::readlink(src.c_str(), target.data(), target.size());
    if (n < 0) throw_errno("readlink " + src.string());
    target.resize(static_cast<size_t>(n));
    e.link = target;
  } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    e.type = S_ISCHR(st.st_mode) ? TarEntry::Type::CharDev : TarEntry::Type::BlockDev;
    e.dev_major = major(st.st_rdev);
    e.dev_minor = minor(st.st_rdev);
  } else if (S_ISFIFO(st.st_mode)) {
    e.type = TarEntry::Type::Fifo;
  } else {
    return std::nullopt;  // sockets do not go into images
  }
  e.xattrs = read_xattrs(src);
  return e;
}

bool is_overlay_whiteout(const struct stat& st) {
  return S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0;
}

bool is_overlay_opaque(const fs::path& dir) {
  char v[2] = {0, 0};
  for (const char* name : {"trusted.overlay.opaque", "user.overlay.opaque"}) {
    ssize_t n = ::lgetxattr(dir.c_str(), name, v, sizeof v);
    if (n == 1 && v[0] == 'y') return true;
  }
  return false;
}

void add_whiteout(const std::string& path, const ScanOptions& o, EntryMap& out) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  TarEntry e;
  e.mode = 0;
  e.mtime = 0;
  out[join(dir, ".wh." + name)] = e;
}

void add_opaque(const std::string& dir, EntryMap& out) {
  TarEntry e;
  e.mode = 0;
  out[join(dir, ".wh..wh..opq")] = e;
}

void put(EntryMap& out, const std::string& path, TarEntry e, const struct stat& st) {
  if (S_ISREG(st.st_mode) && st.st_nlink > 1) e.host_dev = st.st_dev, e.host_ino = st.st_ino;
  out[path] = std::move(e);
}

}  // namespace

void scan_tree(const fs::path& dir, const std::string& prefix, const ScanOptions& o, EntryMap& out) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw Error("cannot read directory " + dir.string() + ": " + ec.message());
  for (const auto& de : it) {
    std::string name = de.path().filename().string();
    std::string path = join(prefix, name);
    struct stat st;
    if (::lstat(de.path().c_str(), &st) != 0) throw_errno("stat " + de.path().string());
    if (o.overlay_whiteouts && is_overlay_whiteout(st)) {
      add_whiteout(path, o, out);
      continue;
    }
    auto e = make_entry(de.path(), st, o);
    if (!e) continue;
    put(out, path, std::move(*e), st);
    if (S_ISDIR(st.st_mode)) {
      if (o.overlay_whiteouts && is_overlay_opaque(de.path())) add_opaque(path, out);
      scan_tree(de.path(), path, o, out);
    }
  }
}

void add_path(const fs::path& src, const std::string& dest, const ScanOptions& o, EntryMap& out) {
  struct stat st;
  if (::lstat(src.c_str(), &st) != 0) throw_errno("stat " + src.string());
  std::string path = canonical_archive_path(dest);
  if (path.empty()) {
    if (!S_ISDIR(st.st_mode)) throw Error("cannot copy file " + src.string() + " to the image root itself");
    scan_tree(src, "", o, out);
    return;
  }
  auto e = make_entry(src, st, o);
  if (!e) throw Error("cannot copy " + src.string() + ": not a file, directory, link, device or fifo");
  put(out, path, std::move(*e), st);
  if (S_ISDIR(st.st_mode)) scan_tree(src, path, o, out);
}

EntryMap entries_from_changeset(const Changeset& c, const ScanOptions& o) {
  EntryMap out;
  if (!c.root.empty()) scan_tree(c.root, "", o, out);
  for (const auto& d : c.deleted) {
    std::string p = canonical_archive_path(d);
    if (p.empty()) throw Error("changeset deletes the root");
    add_whiteout(p, o, out);
  }
  for (const auto& d : c.opaque) add_opaque(canonical_archive_path(d), out);
  add_parent_dirs(o, out);
  link_hardlinks(out);
  return out;
}

}  // namespace sb
