// Upper directory (or changed copy) + lower directory -> Changeset, by one
// walk of the upper side that compares against the lower side where both
// have a path. See changeset.hpp for the rules.
#include "build/changeset.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb {

namespace {

std::vector<std::string> children(const fs::path& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw_errno("opendir " + dir.string());
  while (struct dirent* de = ::readdir(d)) {
    std::string n = de->d_name;
    if (n != "." && n != "..") out.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<struct stat> lstat_opt(const fs::path& p) {
  struct stat st;
  if (::lstat(p.c_str(), &st) != 0) return std::nullopt;
  return st;
}

bool is_whiteout(const struct stat& st) {
  return S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0;
}

bool overlay_xattr(const std::string& name) {
  return name.rfind("trusted.overlay.", 0) == 0 || name.rfind("user.overlay.", 0) == 0;
}

// The xattrs a layer keeps (see layer/tree.cpp), without overlayfs's own.
std::map<std::string, std::string> xattrs(const fs::path& p) {
  std::map<std::string, std::string> out;
  ssize_t len = ::llistxattr(p.c_str(), nullptr, 0);
  if (len <= 0) return out;
  std::string names(static_cast<size_t>(len), '\0');
  len = ::llistxattr(p.c_str(), names.data(), names.size());
  for (size_t i = 0; len > 0 && i < static_cast<size_t>(len);) {
    std::string name(names.c_str() + i);
    i += name.size() + 1;
    if (overlay_xattr(name) || (name.rfind("user.", 0) != 0 && name != "security.capability"))
      continue;
    ssize_t vlen = ::lgetxattr(p.c_str(), name.c_str(), nullptr, 0);
    std::string value(static_cast<size_t>(std::max<ssize_t>(vlen, 0)), '\0');
    vlen = ::lgetxattr(p.c_str(), name.c_str(), value.data(), value.size());
    value.resize(static_cast<size_t>(std::max<ssize_t>(vlen, 0)));
    out[name] = value;
  }
  return out;
}

void strip_overlay_xattrs(const fs::path& p) {
  for (const char* name : {"trusted.overlay.opaque", "user.overlay.opaque"})
    ::lremovexattr(p.c_str(), name);
}

bool same_content(const fs::path& a, const fs::path& b) {
  UniqueFd fa(::open(a.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  UniqueFd fb(::open(b.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fa.get() < 0 || fb.get() < 0) return false;
  std::vector<char> ba(1 << 16), bb(1 << 16);
  for (;;) {
    ssize_t na = ::read(fa.get(), ba.data(), ba.size());
    if (na < 0) throw_errno("read " + a.string());
    size_t got = 0;
    while (got < static_cast<size_t>(na)) {
      ssize_t nb = ::read(fb.get(), bb.data() + got, static_cast<size_t>(na) - got);
      if (nb <= 0) return false;
      got += static_cast<size_t>(nb);
    }
    if (na == 0) return ::read(fb.get(), bb.data(), 1) == 0;
    if (std::memcmp(ba.data(), bb.data(), got) != 0) return false;
  }
}

std::string link_target(const fs::path& p) {
  std::error_code ec;
  return fs::read_symlink(p, ec).string();
}

// Mode, owner and xattrs: what a directory entry of a layer carries (mtimes
// do not count). `priv`: the bits `b` has in the image but not on disk
// (build/privileged.hpp).
bool same_metadata(const fs::path& a, const struct stat& sa, const fs::path& b,
                   const struct stat& sb_, const PrivilegedFile* priv = nullptr) {
  std::map<std::string, std::string> xb = xattrs(b);
  mode_t mb = sb_.st_mode & 07777;
  if (priv) {
    mb = priv->mode;
    if (!priv->capability.empty()) xb["security.capability"] = priv->capability;
  }
  return (sa.st_mode & S_IFMT) == (sb_.st_mode & S_IFMT) && (sa.st_mode & 07777) == mb &&
         sa.st_uid == sb_.st_uid && sa.st_gid == sb_.st_gid && xattrs(a) == xb;
}

bool same_entry(const fs::path& a, const struct stat& sa, const fs::path& b,
                const struct stat& sb_, const PrivilegedFile* priv) {
  if (!same_metadata(a, sa, b, sb_, S_ISREG(sb_.st_mode) ? priv : nullptr)) return false;
  if (S_ISREG(sa.st_mode)) return sa.st_size == sb_.st_size && same_content(a, b);
  if (S_ISLNK(sa.st_mode)) return link_target(a) == link_target(b);
  if (S_ISCHR(sa.st_mode) || S_ISBLK(sa.st_mode)) return sa.st_rdev == sb_.st_rdev;
  return true;  // fifos
}

std::string join(const std::string& rel, const std::string& name) {
  return rel.empty() ? name : rel + "/" + name;
}

class Pruner {
 public:
  Pruner(Changeset& cs, bool overlay, const PrivilegedFiles& privileged)
      : cs_(cs), overlay_(overlay), privileged_(privileged) {}

  // `up`, a directory merged by overlayfs over the lower directory `low`.
  // Returns whether anything under it stays in the changeset.
  bool merged_dir(const fs::path& up, const fs::path& low, const std::string& rel) {
    bool kept = false;
    for (const auto& name : children(up)) {
      fs::path u = up / name, l = low / name;
      std::string path = join(rel, name);
      auto su = lstat_opt(u);
      auto sl = lstat_opt(l);
      if (!su) continue;
      if (is_whiteout(*su)) {
        remove(u);
        if (sl) cs_.deleted.push_back(path), kept = true;
        continue;
      }
      bool opaque = S_ISDIR(su->st_mode) && is_opaque(u);
      if (S_ISDIR(su->st_mode) && sl && S_ISDIR(sl->st_mode) && !opaque) {
        kept |= keep_dir(u, *su, l, *sl, merged_dir(u, l, path));
      } else {
        kept |= entry(u, *su, l, sl, path);
      }
    }
    return kept;
  }

  // `up` replaces, as a whole, the lower directory `low` (or nothing).
  bool complete_dir(const fs::path& up, const fs::path* low, const std::string& rel) {
    strip_overlay_xattrs(up);
    bool kept = false;
    std::vector<std::string> present;
    for (const auto& name : children(up)) {
      fs::path u = up / name;
      auto su = lstat_opt(u);
      if (!su) continue;
      if (overlay_ && is_whiteout(*su)) {  // hides nothing more than being absent does
        remove(u);
        continue;
      }
      present.push_back(name);
      std::optional<struct stat> sl;
      fs::path l;
      if (low) l = *low / name, sl = lstat_opt(l);
      kept |= entry(u, *su, l, sl, join(rel, name));
    }
    if (low)
      for (const auto& name : children(*low))
        if (!std::binary_search(present.begin(), present.end(), name))
          cs_.deleted.push_back(join(rel, name)), kept = true;
    return kept;
  }

 private:
  // A path of `up` in complete mode, or one that differs in kind from below.
  bool entry(const fs::path& u, const struct stat& su, const fs::path& l,
             const std::optional<struct stat>& sl, const std::string& path) {
    if (S_ISDIR(su.st_mode)) {
      bool lower_dir = sl && S_ISDIR(sl->st_mode);
      bool inner = complete_dir(u, lower_dir ? &l : nullptr, path);
      if (!lower_dir) return true;
      return keep_dir(u, su, l, *sl, inner);
    }
    auto priv = privileged_.find(path);
    if (sl && same_entry(u, su, l, *sl, priv == privileged_.end() ? nullptr : &priv->second)) {
      remove(u);
      return false;
    }
    return true;
  }

  bool keep_dir(const fs::path& u, const struct stat& su, const fs::path& l, const struct stat& sl,
                bool inner) {
    if (inner || !same_metadata(u, su, l, sl)) return true;
    remove(u);
    return false;
  }

  bool is_opaque(const fs::path& dir) {
    if (!overlay_) return false;
    char v[2] = {0, 0};
    for (const char* name : {"trusted.overlay.opaque", "user.overlay.opaque"})
      if (::lgetxattr(dir.c_str(), name, v, sizeof v) == 1 && v[0] == 'y') return true;
    return false;
  }

  void remove(const fs::path& p) {
    std::error_code ec;
    fs::remove_all(p, ec);
    if (ec) throw Error("cannot remove " + p.string() + ": " + ec.message());
  }

  Changeset& cs_;
  bool overlay_;
  const PrivilegedFiles& privileged_;
};

}  // namespace

Changeset changeset_from_upper(const fs::path& upper, const fs::path& lower, const PrivilegedFiles& privileged) {
  Changeset cs{upper, {}, {}};
  Pruner(cs, true, privileged).merged_dir(upper, lower, "");
  std::sort(cs.deleted.begin(), cs.deleted.end());
  return cs;
}

Changeset changeset_from_copy(const fs::path& root, const fs::path& lower, const PrivilegedFiles& privileged) {
  Changeset cs{root, {}, {}};
  Pruner(cs, false, privileged).complete_dir(root, &lower, "");
  std::sort(cs.deleted.begin(), cs.deleted.end());
  return cs;
}

namespace {

// Makes `d` as `s` is (a directory empty, a regular file linked with
// `link_file`) and, unless linked, gives it `s`'s owner (as root), mode,
// xattrs and mtime; `inside` runs between the making and the metadata (a
// directory's contents, so that they neither change its mtime nor need it
// writable). False for a socket, which is not copied.
template <typename Inside>
bool copy_one(const fs::path& s, const fs::path& d, bool link_file, Inside inside) {
  struct stat st;
  if (::lstat(s.c_str(), &st) != 0) throw_errno("stat " + s.string());
  if (S_ISDIR(st.st_mode)) {
    if (::mkdir(d.c_str(), 0700) != 0) throw_errno("mkdir " + d.string());
    inside();
  } else if (S_ISREG(st.st_mode) && link_file) {
    if (::link(s.c_str(), d.c_str()) != 0) throw_errno("link " + d.string());
    return true;  // the same inode: its metadata is already right
  } else if (S_ISREG(st.st_mode)) {
    std::error_code ec;
    if (!fs::copy_file(s, d, ec)) throw Error("cannot copy " + s.string() + ": " + ec.message());
  } else if (S_ISLNK(st.st_mode)) {
    if (::symlink(link_target(s).c_str(), d.c_str()) != 0) throw_errno("symlink " + d.string());
  } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode)) {
    if (::mknod(d.c_str(), st.st_mode, st.st_rdev) != 0) throw_errno("mknod " + d.string());
  } else {
    return false;  // sockets
  }
  (void)!::lchown(d.c_str(), st.st_uid, st.st_gid);
  if (!S_ISLNK(st.st_mode)) ::chmod(d.c_str(), st.st_mode & 07777);
  for (const auto& [k, v] : xattrs(s)) ::lsetxattr(d.c_str(), k.c_str(), v.data(), v.size(), 0);
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  ::utimensat(AT_FDCWD, d.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  return true;
}

}  // namespace

void copy_tree(const fs::path& src, const fs::path& dst, bool link_files) {
  for (const auto& name : children(src))
    copy_one(src / name, dst / name, link_files, [&] { copy_tree(src / name, dst / name, link_files); });
}

void copy_entry(const fs::path& src, const fs::path& dst) {
  copy_one(src, dst, false, [] {});
}

}  // namespace sb
