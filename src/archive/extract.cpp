#include "archive/extract.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>
#include <set>
#include <vector>

#include "archive/entry.hpp"
#include "archive/file_writers.hpp"
#include "archive/libarchive.hpp"
#include "archive/read.hpp"
#include "archive/utf8_locale.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/interrupt.hpp"
#include "util/resources.hpp"
#include "util/utf8.hpp"

namespace sb {

namespace {

// What a refusal starts with: "refusing layer entry", or for an archive
// "<label>: refusing archive entry".
[[noreturn]] void refuse(const std::string& refusing, const std::string& path,
                         const std::string& why) {
  throw Error(refusing + " '" + printable_utf8(path) + "': " + why);
}

std::vector<std::string> split_path(const std::string& p) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    parts.push_back(p.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::vector<std::string> split_entry_path(const std::string& refusing, const std::string& raw) {
  if (raw.empty()) refuse(refusing, raw, "empty path");
  if (raw[0] == '/') refuse(refusing, raw, "absolute path");
  std::vector<std::string> comps;
  for (auto& c : split_path(raw)) {
    if (c == "..") refuse(refusing, raw, "path has a '..' component");
    if (!c.empty() && c != ".") comps.push_back(std::move(c));
  }
  if (comps.empty()) refuse(refusing, raw, "names the root itself");
  return comps;
}

std::string join(const std::vector<std::string>& comps, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (i ? "/" : "") + comps[i];
  return s;
}

// Removes `name` in `dirfd`, recursively, never following a symlink.
void remove_at(int dirfd, const std::string& name) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) throw_errno("open " + name);
    ::fchmod(fd, 0700);
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      throw_errno("opendir " + name);
    }
    std::vector<std::string> children;
    while (struct dirent* de = ::readdir(d)) {
      std::string n = de->d_name;
      if (n != "." && n != "..") children.push_back(n);
    }
    for (const auto& c : children) remove_at(::dirfd(d), c);
    ::closedir(d);
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) throw_errno("rmdir " + name);
  } else if (::unlinkat(dirfd, name.c_str(), 0) != 0) {
    throw_errno("unlink " + name);
  }
}

// The image's root directory, with path resolution confined to it. Layers
// follow symlinks on a path as the image would; archives (`follow` false)
// are never written through one.
class Root {
 public:
  Root(const fs::path& dir, std::string refusing, bool follow)
      : dir_(dir), refusing_(std::move(refusing)), follow_(follow) {
    fd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd_.get() < 0) throw_errno("open target " + dir.string());
  }

  [[noreturn]] void refuse(const std::string& entry, const std::string& why) const {
    sb::refuse(refusing_, entry, why);
  }
  const std::string& refusing() const { return refusing_; }

  // Opens the directory named by `comps`, following symlinks as the image
  // would (absolute targets start at the image root) and refusing any that
  // lead out of it. Missing directories are created (0755) when `create`.
  UniqueFd open_dir(const std::vector<std::string>& comps, bool create,
                    const std::string& entry) const {
    std::vector<std::string> todo(comps.rbegin(),
                                  comps.rend());  // a stack: next component at the back
    std::vector<UniqueFd> stack;                  // open directories below the root, deepest last
    auto top = [&] { return stack.empty() ? fd_.get() : stack.back().get(); };
    int hops = 0;
    while (!todo.empty()) {
      std::string c = todo.back();
      todo.pop_back();
      if (c.empty() || c == ".") continue;
      if (c == "..") {
        if (stack.empty()) refuse(entry, "a symlink on its path leads out of the root");
        stack.pop_back();
        continue;
      }
      struct stat st;
      if (::fstatat(top(), c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT || !create)
          refuse(entry, "parent directory '" + c + "' does not exist");
        if (::mkdirat(top(), c.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("mkdir " + c);
        st.st_mode = S_IFDIR;
      }
      if (S_ISLNK(st.st_mode)) {
        if (!follow_) refuse(entry, "goes through a non-directory: '" + c + "' is a symlink");
        if (++hops > 40) refuse(entry, "too many levels of symlinks");
        std::string target = link_text(top(), c);
        if (!target.empty() && target[0] == '/') stack.clear();
        auto parts = split_path(target);
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
        continue;
      }
      if (!S_ISDIR(st.st_mode)) refuse(entry, "'" + c + "' on its path is not a directory");
      int fd = ::openat(top(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) throw_errno("open " + c);
      stack.emplace_back(fd);
    }
    if (stack.empty()) return UniqueFd(::dup(fd_.get()));
    return std::move(stack.back());
  }

  // Whether a symlink at directory `at` with text `target` leads to
  // `inside` or below it, following the links on its way that exist now
  // (in the root) and, past a missing name, lexically; a ".." there is
  // refused (a link made there later would move it). False when it climbs
  // out of the root.
  bool resolves_below(const std::vector<std::string>& at, const std::string& target,
                      const std::vector<std::string>& inside) const {
    std::vector<std::string> todo;
    auto parts = split_path(target);
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
    for (auto it = at.rbegin(); it != at.rend(); ++it) todo.push_back(*it);
    std::vector<std::string> names;  // where the walk is, from the root
    std::vector<UniqueFd> fds;       // the directories open for names' first fds.size() entries
    auto top = [&] { return fds.empty() ? fd_.get() : fds.back().get(); };
    int hops = 0;
    while (!todo.empty()) {
      std::string c = todo.back();
      todo.pop_back();
      if (c.empty() || c == ".") continue;
      if (c == "..") {
        // Above a name that is not there (yet), the walk would go on
        // lexically: a link made there later (to "." say) would move where
        // this one leads, out of `inside`. Refused.
        if (names.empty() || fds.size() < names.size()) return false;
        names.pop_back();
        if (fds.size() > names.size()) fds.pop_back();
        continue;
      }
      struct stat st;
      if (fds.size() < names.size() || ::fstatat(top(), c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          !(S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode))) {
        names.push_back(c);  // missing (or not a directory): lexically from here
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        if (++hops > 40) return false;
        std::string t = link_text(top(), c);
        if (!t.empty() && t[0] == '/') names.clear(), fds.clear();
        auto ps = split_path(t);
        for (auto it = ps.rbegin(); it != ps.rend(); ++it) todo.push_back(*it);
        continue;
      }
      int fd = ::openat(top(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) throw_errno("open " + c);
      fds.emplace_back(fd);
      names.push_back(c);
    }
    return names.size() >= inside.size() && std::equal(inside.begin(), inside.end(), names.begin());
  }

  int fd() const { return fd_.get(); }

 private:
  static std::string link_text(int dirfd, const std::string& name) {
    std::string target(PATH_MAX, '\0');
    ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
    if (n < 0) throw_errno("readlink " + name);
    target.resize(static_cast<size_t>(n));
    return target;
  }

  fs::path dir_;
  std::string refusing_;
  bool follow_;
  UniqueFd fd_;
};

// The xattrs a layer may set on a host file: user.* but not user.overlay.*
// (overlayfs' markers when it runs without privileges: opaque directories,
// redirects, metacopy), and a file capability (security.capability) only
// where owners are kept too. Never trusted.* (overlayfs' own markers with
// privileges, and the namespace of other privileged tools), other
// security.* (LSM labels) or system.* (ACLs): a layer's value there would
// be a host decision made by an image.
bool xattr_allowed(const char* name, bool preserve_owner) {
  std::string_view n = name ? name : "";
  if (n.starts_with("user.")) return !n.starts_with("user.overlay.");
  return preserve_owner && n == "security.capability";
}

struct PendingDir {
  std::vector<std::string> comps;
  uint32_t mode;
  int64_t mtime;
};

// Applies entries onto a Root: a layer's (`archive` null), or an archive's
// that is not a layer (`archive` set: paths mapped, no whiteouts, owners,
// xattrs, times or devices; see ArchiveOptions).
class LayerApplier {
 public:
  LayerApplier(const Root& root, const ExtractOptions& o, ExtractStats& stats,
               const ArchiveOptions* archive = nullptr, FileWriters* writers = nullptr)
      : root_(root), o_(o), stats_(stats), archive_(archive), writers_(writers) {
    if (archive_ && !archive_->links_inside.empty())
      links_inside_ = split_entry_path(root_.refusing(), archive_->links_inside);
  }

  // The paths below the root of the entries applied (archives only).
  std::vector<std::string> applied;

  void apply(struct archive* a, struct archive_entry* e) {
    // The bytes as archived, whatever this process's locale; a name need not
    // be UTF-8 (paths on Linux are bytes, and base images come from anywhere).
    const char* name_bytes =
        archived_name(archive_entry_pathname_utf8(e), archive_entry_pathname(e));
    if (!name_bytes) throw Error(root_.refusing() + " without a name");
    std::string raw = name_bytes;
    if (archive_ && !raw.empty() &&
        raw[0] != '/') {  // "./" in an archive: the target itself, already there
      auto parts = split_path(raw);
      if (std::all_of(parts.begin(), parts.end(),
                      [](const std::string& c) { return c.empty() || c == "."; }))
        return;
    }
    auto comps = split_entry_path(root_.refusing(), raw);
    if (archive_) {
      std::string mapped =
          archive_->map ? archive_->map(join(comps, comps.size())) : join(comps, comps.size());
      if (mapped.empty()) return;
      comps = split_entry_path(root_.refusing(), mapped);
    }
    std::string path = join(comps, comps.size());
    if (++stats_.entries > o_.max_entries)
      refuse(raw, "more than " + std::to_string(o_.max_entries) + " entries (the limit)");
    const std::string name = comps.back();
    std::vector<std::string> parent(comps.begin(), comps.end() - 1);

    if (name.rfind(".wh.", 0) == 0) {
      if (archive_) refuse(raw, "a name a layer would take for a whiteout");
      return whiteout(raw, parent, name.substr(4));
    }
    if (!seen_.insert(path).second && !archive_) refuse(raw, "appears twice in the layer");

    const char* hardlink = archived_name(archive_entry_hardlink_utf8(e), archive_entry_hardlink(e));
    mode_t type = archive_entry_filetype(e);
    const int dir = parent_dir(parent, raw);
    uint32_t mode = archive_entry_perm(e);
    if (archive_) {
      if (archive_->normalize_modes) mode = (type == AE_IFDIR || (mode & 0111)) ? 0755 : 0644;
      mode &= 0777;  // no setuid, setgid or sticky bits from an archive
    }
    if (hardlink) {
      link(raw, dir, name, hardlink);
      return done(path);
    }

    if (type == AE_IFDIR) {
      struct stat st;
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          !S_ISDIR(st.st_mode)) {
        // A layer's directory replaces what a lower layer had there; an
        // archive's over its own link or file is refused.
        if (archive_)
          refuse(raw, "a directory over the " +
                          std::string(S_ISLNK(st.st_mode) ? "symlink" : "file") +
                          " made there before");
        remove_at(dir, name);
      }
      if (::mkdirat(dir, name.c_str(), 0700) != 0 && errno != EEXIST)
        throw_errno("mkdir " + raw);
      dirs_.push_back({comps, mode, archive_entry_mtime(e)});
      return done(path);
    }
    if (archive_ && type != AE_IFREG && type != AE_IFLNK)
      refuse(raw, "not a file, directory or link");
    remove_at(dir, name);
    switch (type) {
      case AE_IFREG:
        file(a, e, raw, dir, name, mode);
        return done(path);
      case AE_IFLNK: {
        const char* target = archived_name(archive_entry_symlink_utf8(e), archive_entry_symlink(e));
        std::string t = target ? target : "";
        if (archive_ && archive_->links_inside.size() &&
            (t.empty() || t[0] == '/' || !root_.resolves_below(parent, t, links_inside_)))
          refuse(raw, "symlink to '" + printable_utf8(t) + "' leaves the archive");
        if (::symlinkat(t.c_str(), dir, name.c_str()) != 0) throw_errno("symlink " + raw);
        break;
      }
      case AE_IFCHR:
      case AE_IFBLK:
        if (o_.skip_devices)
          return;  // what the layers below had there is gone, as a whiteout would leave it
        if (!o_.allow_devices) refuse(raw, "device nodes are not allowed here");
        if (::mknodat(dir, name.c_str(), type | mode, archive_entry_rdev(e)) != 0)
          throw_errno("mknod " + raw);
        break;
      case AE_IFIFO:
        if (::mkfifoat(dir, name.c_str(), mode) != 0) throw_errno("mkfifo " + raw);
        break;
      default:
        refuse(raw, "unsupported entry type");
    }
    if (!archive_) {
      set_times(dir, name, archive_entry_mtime(e));
      chown(dir, name, e);
    }
    done(path);
  }

  // Directory modes and times last, deepest first, so children could be written.
  void finish() {
    if (writers_) writers_->wait();
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      UniqueFd fd = root_.open_dir(it->comps, false, join(it->comps, it->comps.size()));
      ::fchmod(fd.get(), it->mode);
      if (archive_)
        continue;  // an archive's times are not kept (as before: not in the tree digest)
      struct timespec ts[2] = {{it->mtime, 0}, {it->mtime, 0}};
      ::futimens(fd.get(), ts);
    }
  }

 private:
  [[noreturn]] void refuse(const std::string& raw, const std::string& why) const {
    root_.refuse(raw, why);
  }

  void done(const std::string& path) {
    if (archive_) applied.push_back(path);
  }

  // The directory `parent` names, resolved by the root's walk. Entries of
  // one directory in a row (a layer's usual order) share one walk: an entry
  // changes only what is at its own name, below that directory, never what
  // the directory's path leads to. A whiteout can (it removes a name, which
  // may be a directory on that path, or a link on it), so it ends the sharing.
  int parent_dir(const std::vector<std::string>& parent, const std::string& raw) {
    if (!parent_shared_ || parent_comps_ != parent) {
      parent_fd_ = root_.open_dir(parent, true, raw);
      parent_comps_ = parent;
      parent_shared_ = true;
    }
    return parent_fd_.get();
  }

  void whiteout(const std::string& raw, const std::vector<std::string>& parent,
                const std::string& target) {
    parent_shared_ = false;  // what it removes may be on the shared directory's path
    if (target == ".wh..opq") {
      UniqueFd dir = root_.open_dir(parent, true, raw);
      std::string prefix = join(parent, parent.size());
      DIR* d = ::fdopendir(::dup(dir.get()));
      if (!d) throw_errno("opendir " + prefix);
      std::vector<std::string> children;
      while (struct dirent* de = ::readdir(d)) {
        std::string n = de->d_name;
        if (n != "." && n != ".." && !seen_.count(prefix.empty() ? n : prefix + "/" + n))
          children.push_back(n);
      }
      ::closedir(d);
      for (const auto& c : children) remove_at(dir.get(), c);
      return;
    }
    if (target.empty()) refuse(raw, "whiteout names nothing");
    if (target == "." || target == ".." || target.find('/') != std::string::npos)
      refuse(raw, "whiteout of '" + target + "'");
    std::vector<std::string> victim = parent;
    victim.push_back(target);
    if (seen_.count(join(victim, victim.size()))) return;  // whiteouts hide lower layers only
    UniqueFd dir = root_.open_dir(parent, true, raw);
    remove_at(dir.get(), target);
  }

  void link(const std::string& raw, int dirfd, const std::string& name,
            const std::string& target_raw) {
    auto tcomps = split_entry_path(root_.refusing(), target_raw);
    if (archive_ && archive_->map) {
      std::string mapped = archive_->map(join(tcomps, tcomps.size()));
      if (mapped.empty()) refuse(raw, "hardlink to '" + target_raw + "', which is not unpacked");
      tcomps = split_entry_path(root_.refusing(), mapped);
    }
    std::vector<std::string> tparent(tcomps.begin(), tcomps.end() - 1);
    UniqueFd tdir = root_.open_dir(tparent, false, raw);
    struct stat st;
    if (::fstatat(tdir.get(), tcomps.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      refuse(raw, "hardlink to '" + target_raw + "', which does not exist");
    if (S_ISDIR(st.st_mode)) refuse(raw, "hardlink to a directory");
    if (archive_ && !S_ISREG(st.st_mode))
      refuse(raw, "hardlink to '" + target_raw + "', which is not a file");
    remove_at(dirfd, name);
    if (archive_ && archive_->copy_hardlinks)
      return copy(raw, tdir.get(), tcomps.back(), st, dirfd, name);
    if (::linkat(tdir.get(), tcomps.back().c_str(), dirfd, name.c_str(), 0) != 0)
      throw_errno("link " + raw);
  }

  // A hardlink as a copy of its target (opened without following a link).
  void copy(const std::string& raw, int tdir, const std::string& tname, const struct stat& st,
            int dirfd, const std::string& name) {
    if (writers_) writers_->wait();  // its target may still be being written
    UniqueFd in(::openat(tdir, tname.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (in.get() < 0) throw_errno("open " + tname);
    if (stats_.bytes + static_cast<uint64_t>(st.st_size) > o_.max_bytes)
      refuse(raw, "unpacks past the size limit of " + std::to_string(o_.max_bytes) + " bytes");
    UniqueFd out(
        ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (out.get() < 0) throw_errno("create " + raw);
    std::vector<char> buf(1 << 17);
    for (;;) {
      ssize_t n = ::read(in.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno("read " + tname);
      if (n == 0) break;
      write_all(out.get(), buf.data(), static_cast<size_t>(n), raw);
    }
    stats_.bytes += static_cast<uint64_t>(st.st_size);
    ::fchmod(out.get(), st.st_mode & 0777);
  }

  void file(struct archive* a, struct archive_entry* e, const std::string& raw, int dirfd,
            const std::string& name, uint32_t mode) {
    uint64_t size = archive_entry_size_is_set(e) ? static_cast<uint64_t>(archive_entry_size(e)) : 0;
    if (stats_.bytes + size > o_.max_bytes)
      refuse(raw, "unpacks past the size limit of " + std::to_string(o_.max_bytes) + " bytes");
    UniqueFd fd(
        ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.get() < 0) throw_errno("create " + raw);
    if (!archive_) return file_by_writers(a, e, raw, std::move(fd), size, mode);
    // An archive's file: its bytes, size and mode, here.
    for_each_block(a, raw, size, [&](const void* buf, size_t len, uint64_t offset) {
      if (::pwrite(fd.get(), buf, len, static_cast<off_t>(offset)) != static_cast<ssize_t>(len))
        throw_errno("write " + raw);
    });
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) throw_errno("truncate " + raw);
    stats_.bytes += size;
    ::fchmod(fd.get(), mode);
  }

  // The current entry's data blocks, none past the `size` its header says.
  template <typename Block>
  void for_each_block(struct archive* a, const std::string& raw, uint64_t size, const Block& block) {
    const void* buf;
    size_t len;
    la_int64_t offset;
    for (;;) {
      int rc = archive_read_data_block(a, &buf, &len, &offset);
      if (rc == ARCHIVE_EOF) break;
      if (rc < ARCHIVE_WARN) throw Error("reading '" + raw + "': " + archive_why(a));
      if (static_cast<uint64_t>(offset) + len > size) refuse(raw, "holds more data than its header says");
      block(buf, len, static_cast<uint64_t>(offset));
    }
  }

  // A layer's file: checked here, in order; its bytes and then its metadata
  // (size, owner, mode, xattrs, times: through its descriptor) written by
  // the writers' threads.
  void file_by_writers(struct archive* a, struct archive_entry* e, const std::string& raw, UniqueFd fd,
                       uint64_t size, uint32_t mode) {
    auto f = writers_->open(std::move(fd), raw, size);
    for_each_block(a, raw, size,
                   [&](const void* buf, size_t len, uint64_t offset) { writers_->write(f, buf, len, offset); });
    stats_.bytes += size;
    const bool set_owner = o_.preserve_owner && ::geteuid() == 0;
    const uid_t uid = static_cast<uid_t>(archive_entry_uid(e));
    const gid_t gid = static_cast<gid_t>(archive_entry_gid(e));
    // Owners not kept, the file is the unpacker's (root's, maybe): a setuid or
    // setgid bit would make it a host program that runs as them.
    if (!o_.preserve_owner) mode &= ~static_cast<uint32_t>(S_ISUID | S_ISGID);
    std::vector<std::pair<std::string, std::string>> xattrs;
    archive_entry_xattr_reset(e);
    const char* xname;
    const void* xval;
    size_t xlen;
    while (archive_entry_xattr_next(e, &xname, &xval, &xlen) == ARCHIVE_OK)
      if (xattr_allowed(xname, o_.preserve_owner))
        xattrs.emplace_back(xname, std::string(static_cast<const char*>(xval), xlen));
    const int64_t mtime = archive_entry_mtime(e);
    writers_->close(f, [=](int fd) {
      if (::ftruncate(fd, static_cast<off_t>(size)) != 0) throw_errno("truncate " + raw);
      if (set_owner) (void)::fchown(fd, uid, gid);
      ::fchmod(fd, mode);
      for (const auto& [n, v] : xattrs)
        ::fsetxattr(fd, n.c_str(), v.data(), v.size(), 0);  // best effort: some need root or a filesystem that has them
      struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
      ::futimens(fd, ts);
    });
  }

  void set_times(int dirfd, const std::string& name, int64_t mtime) {
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    ::utimensat(dirfd, name.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }

  void chown(int dirfd, const std::string& name, struct archive_entry* e) {
    if (o_.preserve_owner && ::geteuid() == 0)
      ::fchownat(dirfd, name.c_str(), archive_entry_uid(e), archive_entry_gid(e),
                 AT_SYMLINK_NOFOLLOW);
  }

  const Root& root_;
  const ExtractOptions& o_;
  ExtractStats& stats_;
  const ArchiveOptions* archive_;
  FileWriters* writers_;
  std::vector<std::string> links_inside_;
  std::set<std::string> seen_;
  std::vector<PendingDir> dirs_;
  UniqueFd parent_fd_;
  std::vector<std::string> parent_comps_;
  bool parent_shared_ = false;
};

// Threads that write a layer's files: the page cache takes a copy of every
// byte, which is most of an unpack's work; beyond 8 the disk decides.
size_t file_writer_threads() { return std::clamp<size_t>(usable_cores(), 1, 8); }

}  // namespace

namespace {

// Whether `blob` ends in eStargz's footer: a 51-byte empty gzip member whose
// extra field holds "SG", the TOC's offset in hex and "STARGZ" (layer/estargz.cpp).
bool has_estargz_footer(const fs::path& blob) {
  UniqueFd fd(::open(blob.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || st.st_size < 51) return false;
  unsigned char f[51];
  if (::pread(fd.get(), f, sizeof f, st.st_size - 51) != 51) return false;
  static const unsigned char head[16] = {0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 26, 0, 'S', 'G', 22, 0};
  return std::equal(head + 0, head + 3, f) && (f[3] & 4) && std::equal(head + 10, head + 16, f + 10) &&
         std::string_view(reinterpret_cast<const char*>(f) + 32, 6) == "STARGZ";
}

// eStargz's own entries at the root, which its clients do not unpack either.
bool estargz_metadata(struct archive_entry* e) {
  const char* n = archive_entry_pathname(e);
  if (!n) return false;
  std::string_view p(n);
  while (p.substr(0, 2) == "./") p.remove_prefix(2);
  return p == "stargz.index.json" || p == ".no.prefetch.landmark" || p == ".prefetch.landmark";
}

}  // namespace

namespace {

void apply_layer(LayerReader& a, const fs::path& blob, const fs::path& target,
                 const ExtractOptions& options, ExtractStats& stats) {
  Utf8Locale locale;
  Root root(target, "refusing layer entry", true);
  FileWriters writers(file_writer_threads());
  LayerApplier applier(root, options, stats, nullptr, &writers);
  const bool estargz = has_estargz_footer(blob);
  try {
    while (struct archive_entry* e = a.next()) {
      check_interrupted();
      if (estargz && archive_entry_filetype(e) == AE_IFREG && estargz_metadata(e)) continue;
      applier.apply(a.get(), e);
    }
    a.read_to_end();
    applier.finish();
  } catch (Error& err) {
    err.add_trace("while extracting layer " + blob.string());
    throw;
  }
}

// What the layers after the one being extracted may hold inflated in
// memory, all together: an eighth of the memory left, at most 1 GiB.
size_t read_ahead_budget() {
  uint64_t avail = available_memory().value_or(0);
  return static_cast<size_t>(std::min<uint64_t>(avail / 8, 1ull << 30));
}

}  // namespace

void extract_layer(const fs::path& blob, const fs::path& target, const ExtractOptions& options,
                   ExtractStats& stats) {
  LayerReader a(blob);
  apply_layer(a, blob, target, options, stats);
}

void extract_layers(const std::vector<fs::path>& blobs, const fs::path& target,
                    const ExtractOptions& options, ExtractStats& stats,
                    const std::function<void(size_t)>& on_error) {
  // Readers of the next layers, opened (their inflating started) while an
  // earlier one is extracted; one that fails to open fails at its turn.
  struct Ahead {
    std::unique_ptr<LayerReader> reader;
    std::exception_ptr error;
  };
  const size_t layers_ahead = options.layers_ahead >= 0
                                  ? static_cast<size_t>(options.layers_ahead)
                                  : std::min<size_t>(std::max(usable_cores(), 2u) - 2, 4);
  // The layer being read keeps what it had inflated ahead until it is read:
  // with it, layers_ahead + 1 hold a share each.
  const size_t bytes_ahead = layers_ahead ? read_ahead_budget() / (layers_ahead + 1) : 0;
  std::deque<Ahead> ahead;
  size_t opened = 0;
  for (size_t i = 0; i < blobs.size(); ++i) {
    try {
      while (opened < blobs.size() && opened <= i + layers_ahead) {
        Ahead next;
        try {
          next.reader = std::make_unique<LayerReader>(blobs[opened], false, opened == i ? 0 : bytes_ahead);
        } catch (const Error&) {
          next.error = std::current_exception();
        }
        ahead.push_back(std::move(next));
        ++opened;
      }
      Ahead current = std::move(ahead.front());
      ahead.pop_front();
      if (current.error) std::rethrow_exception(current.error);
      current.reader->set_ahead(0);  // now read: the usual few chunks
      apply_layer(*current.reader, blobs[i], target, options, stats);
    } catch (const Error&) {
      if (on_error) on_error(i);
      throw;
    }
  }
}

namespace {

// A redist or source archive: a tar (any compression) or a zip.
std::unique_ptr<ArchiveReader> open_archive(const fs::path& file, const std::string& label) {
  return std::make_unique<ArchiveReader>(file, ArchiveReader::kTar | ArchiveReader::kZip,
                                         ArchiveReader::Filters::All, label);
}

// The one top directory every entry is under, or "" when there is none
// (a file at the top, or two top names).
std::string single_top(const fs::path& file, const std::string& label) {
  auto a = open_archive(file, label);
  std::string top;
  while (struct archive_entry* e = a->next()) {
    const char* n = archived_name(archive_entry_pathname_utf8(e), archive_entry_pathname(e));
    if (!n) throw Error(label + ": an entry without a name");
    std::string p;
    try {
      p = canonical_archive_path(n);
    } catch (const Error& e) {
      throw Error(label + ": refusing archive entry '" + printable_utf8(n) + "': " + e.what());
    }
    if (p.empty()) continue;  // "./"
    size_t slash = p.find('/');
    if (slash == std::string::npos && archive_entry_filetype(e) != AE_IFDIR) return "";
    std::string first = p.substr(0, slash);
    if (top.empty())
      top = first;
    else if (first != top)
      return "";
  }
  return top;
}

}  // namespace

std::vector<std::string> extract_archive(const fs::path& file, const fs::path& target,
                                         const ArchiveOptions& options) {
  Utf8Locale locale;
  ArchiveOptions o = options;
  if (o.strip_single_top) {
    std::string top = single_top(file, o.label);
    if (!top.empty()) {
      auto inner = o.map;
      o.map = [top, inner](const std::string& p) -> std::string {
        if (p == top) return "";
        std::string rest = p.starts_with(top + "/") ? p.substr(top.size() + 1) : p;
        return inner ? inner(rest) : rest;
      };
    }
  }
  fs::create_directories(target);
  Root root(target, o.label + ": refusing archive entry", false);
  ExtractOptions limits;
  limits.max_bytes = o.max_bytes;
  limits.max_entries = o.max_entries;
  ExtractStats stats;
  LayerApplier applier(root, limits, stats, &o);
  auto a = open_archive(file, o.label);
  try {
    while (struct archive_entry* e = a->next()) {
      check_interrupted();
      applier.apply(a->get(), e);
    }
    applier.finish();
  } catch (Error& err) {
    err.add_trace("while unpacking " + o.label + " into " + target.string());
    throw;
  }
  return std::move(applier.applied);
}

void decompress_layer(const fs::path& blob, const fs::path& out) {
  LayerReader a(blob, true);
  if (!a.strict().next()) throw Error("cannot read layer " + blob.string() + ": empty");
  AtomicFile f(out);
  a.read_blocks("decompressing " + blob.string(),
                [&](const void* buf, size_t len, int64_t) { f.write(buf, len); });
  f.commit();
}

UncompressedDigest uncompressed_digest(const fs::path& blob) {
  LayerReader a(blob, true);
  if (!a.strict().next()) throw Error("cannot read layer " + blob.string() + ": empty");
  Sha256 sha;
  uint64_t size = 0;
  a.read_blocks("decompressing " + blob.string(), [&](const void* buf, size_t len, int64_t) {
    sha.update(buf, len);
    size += len;
  });
  return {sha.finish(), size};
}

}  // namespace sb
