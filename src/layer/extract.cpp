#include "layer/extract.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <vector>

#include "layer/libarchive.hpp"
#include "layer/read.hpp"
#include "layer/utf8_locale.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/interrupt.hpp"
#include "util/utf8.hpp"

namespace sb {

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw Error("refusing layer entry '" + printable_utf8(path) + "': " + why);
}

std::vector<std::string> split_entry_path(const std::string& raw) {
  if (raw.empty()) refuse(raw, "empty path");
  if (raw[0] == '/') refuse(raw, "absolute path");
  std::vector<std::string> comps;
  size_t start = 0;
  while (start <= raw.size()) {
    size_t end = raw.find('/', start);
    if (end == std::string::npos) end = raw.size();
    std::string c = raw.substr(start, end - start);
    if (c == "..") refuse(raw, "path has a '..' component");
    if (!c.empty() && c != ".") comps.push_back(c);
    start = end + 1;
  }
  if (comps.empty()) refuse(raw, "names the root itself");
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

// The image's root directory, with path resolution confined to it.
class Root {
 public:
  explicit Root(const fs::path& dir) : dir_(dir) {
    fd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd_.get() < 0) throw_errno("open target " + dir.string());
  }

  // Opens the directory named by `comps`, following symlinks as the image
  // would (absolute targets start at the image root) and refusing any that
  // lead out of it. Missing directories are created (0755) when `create`.
  UniqueFd open_dir(const std::vector<std::string>& comps, bool create, const std::string& entry) const {
    std::vector<std::string> todo(comps.rbegin(), comps.rend());  // a stack: next component at the back
    std::vector<UniqueFd> stack;  // open directories below the root, deepest last
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
        if (errno != ENOENT || !create) refuse(entry, "parent directory '" + c + "' does not exist");
        if (::mkdirat(top(), c.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("mkdir " + c);
        st.st_mode = S_IFDIR;
      }
      if (S_ISLNK(st.st_mode)) {
        if (++hops > 40) refuse(entry, "too many levels of symlinks");
        std::string target(PATH_MAX, '\0');
        ssize_t n = ::readlinkat(top(), c.c_str(), target.data(), target.size());
        if (n < 0) throw_errno("readlink " + c);
        target.resize(static_cast<size_t>(n));
        if (!target.empty() && target[0] == '/') stack.clear();
        size_t start = 0;
        std::vector<std::string> parts;
        while (start <= target.size()) {
          size_t end = target.find('/', start);
          if (end == std::string::npos) end = target.size();
          parts.push_back(target.substr(start, end - start));
          start = end + 1;
        }
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

  int fd() const { return fd_.get(); }

 private:
  fs::path dir_;
  UniqueFd fd_;
};

struct PendingDir {
  std::vector<std::string> comps;
  uint32_t mode;
  int64_t mtime;
};

class LayerApplier {
 public:
  LayerApplier(const Root& root, const ExtractOptions& o, ExtractStats& stats) : root_(root), o_(o), stats_(stats) {}

  void apply(struct archive* a, struct archive_entry* e) {
    // The bytes as archived, whatever this process's locale; a name need not
    // be UTF-8 (paths on Linux are bytes, and base images come from anywhere).
    const char* name_bytes = archived_name(archive_entry_pathname_utf8(e), archive_entry_pathname(e));
    if (!name_bytes) throw Error("refusing a layer entry without a name");
    std::string raw = name_bytes;
    auto comps = split_entry_path(raw);
    std::string path = join(comps, comps.size());
    if (++stats_.entries > o_.max_entries)
      refuse(raw, "more than " + std::to_string(o_.max_entries) + " entries (the limit)");
    const std::string name = comps.back();
    std::vector<std::string> parent(comps.begin(), comps.end() - 1);

    if (name.rfind(".wh.", 0) == 0) return whiteout(raw, parent, name.substr(4));
    if (!seen_.insert(path).second) refuse(raw, "appears twice in the layer");

    UniqueFd dir = root_.open_dir(parent, true, raw);
    const char* hardlink = archived_name(archive_entry_hardlink_utf8(e), archive_entry_hardlink(e));
    mode_t type = archive_entry_filetype(e);
    uint32_t mode = archive_entry_perm(e);
    if (hardlink) return link(raw, dir.get(), name, hardlink);

    if (type == AE_IFDIR) {
      struct stat st;
      if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
        remove_at(dir.get(), name);
      if (::mkdirat(dir.get(), name.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("mkdir " + raw);
      dirs_.push_back({comps, mode, archive_entry_mtime(e)});
      return;
    }
    remove_at(dir.get(), name);
    switch (type) {
      case AE_IFREG: return file(a, e, raw, dir.get(), name, mode);
      case AE_IFLNK: {
        const char* target = archived_name(archive_entry_symlink_utf8(e), archive_entry_symlink(e));
        if (::symlinkat(target ? target : "", dir.get(), name.c_str()) != 0) throw_errno("symlink " + raw);
        break;
      }
      case AE_IFCHR:
      case AE_IFBLK:
        if (!o_.allow_devices) refuse(raw, "device nodes are not allowed here");
        if (::mknodat(dir.get(), name.c_str(), type | mode, archive_entry_rdev(e)) != 0) throw_errno("mknod " + raw);
        break;
      case AE_IFIFO:
        if (::mkfifoat(dir.get(), name.c_str(), mode) != 0) throw_errno("mkfifo " + raw);
        break;
      default: refuse(raw, "unsupported entry type");
    }
    set_times(dir.get(), name, archive_entry_mtime(e));
    chown(dir.get(), name, e);
  }

  // Directory modes and times last, deepest first, so children could be written.
  void finish() {
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      UniqueFd fd = root_.open_dir(it->comps, false, join(it->comps, it->comps.size()));
      ::fchmod(fd.get(), it->mode);
      struct timespec ts[2] = {{it->mtime, 0}, {it->mtime, 0}};
      ::futimens(fd.get(), ts);
    }
  }

 private:
  void whiteout(const std::string& raw, const std::vector<std::string>& parent, const std::string& target) {
    if (target == ".wh..opq") {
      UniqueFd dir = root_.open_dir(parent, true, raw);
      std::string prefix = join(parent, parent.size());
      DIR* d = ::fdopendir(::dup(dir.get()));
      if (!d) throw_errno("opendir " + prefix);
      std::vector<std::string> children;
      while (struct dirent* de = ::readdir(d)) {
        std::string n = de->d_name;
        if (n != "." && n != ".." && !seen_.count(prefix.empty() ? n : prefix + "/" + n)) children.push_back(n);
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

  void link(const std::string& raw, int dirfd, const std::string& name, const std::string& target_raw) {
    auto tcomps = split_entry_path(target_raw);
    std::vector<std::string> tparent(tcomps.begin(), tcomps.end() - 1);
    UniqueFd tdir = root_.open_dir(tparent, false, raw);
    struct stat st;
    if (::fstatat(tdir.get(), tcomps.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      refuse(raw, "hardlink to '" + target_raw + "', which does not exist");
    if (S_ISDIR(st.st_mode)) refuse(raw, "hardlink to a directory");
    remove_at(dirfd, name);
    if (::linkat(tdir.get(), tcomps.back().c_str(), dirfd, name.c_str(), 0) != 0) throw_errno("link " + raw);
  }

  void file(struct archive* a, struct archive_entry* e, const std::string& raw, int dirfd, const std::string& name,
            uint32_t mode) {
    uint64_t size = archive_entry_size_is_set(e) ? static_cast<uint64_t>(archive_entry_size(e)) : 0;
    if (stats_.bytes + size > o_.max_bytes)
      refuse(raw, "unpacks past the size limit of " + std::to_string(o_.max_bytes) + " bytes");
    UniqueFd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.get() < 0) throw_errno("create " + raw);
    const void* buf;
    size_t len;
    la_int64_t offset;
    uint64_t written = 0;
    for (;;) {
      int rc = archive_read_data_block(a, &buf, &len, &offset);
      if (rc == ARCHIVE_EOF) break;
      if (rc < ARCHIVE_WARN) throw Error("reading '" + raw + "': " + archive_why(a));
      if (static_cast<uint64_t>(offset) + len > size) refuse(raw, "holds more data than its header says");
      if (::pwrite(fd.get(), buf, len, offset) != static_cast<ssize_t>(len)) throw_errno("write " + raw);
      written = std::max<uint64_t>(written, static_cast<uint64_t>(offset) + len);
    }
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) throw_errno("truncate " + raw);
    stats_.bytes += size;
    if (o_.preserve_owner && ::geteuid() == 0) ::fchown(fd.get(), archive_entry_uid(e), archive_entry_gid(e));
    ::fchmod(fd.get(), mode);
    archive_entry_xattr_reset(e);
    const char* xname;
    const void* xval;
    size_t xlen;
    while (archive_entry_xattr_next(e, &xname, &xval, &xlen) == ARCHIVE_OK)
      ::fsetxattr(fd.get(), xname, xval, xlen, 0);  // best effort: some need root or a filesystem that has them
    struct timespec ts[2] = {{archive_entry_mtime(e), 0}, {archive_entry_mtime(e), 0}};
    ::futimens(fd.get(), ts);
  }

  void set_times(int dirfd, const std::string& name, int64_t mtime) {
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    ::utimensat(dirfd, name.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }

  void chown(int dirfd, const std::string& name, struct archive_entry* e) {
    if (o_.preserve_owner && ::geteuid() == 0)
      ::fchownat(dirfd, name.c_str(), archive_entry_uid(e), archive_entry_gid(e), AT_SYMLINK_NOFOLLOW);
  }

  const Root& root_;
  const ExtractOptions& o_;
  ExtractStats& stats_;
  std::set<std::string> seen_;
  std::vector<PendingDir> dirs_;
};

}  // namespace

void extract_layer(const fs::path& blob, const fs::path& target, const ExtractOptions& options, ExtractStats& stats) {
  Utf8Locale locale;
  Root root(target);
  LayerReader a(blob);
  LayerApplier applier(root, options, stats);
  struct archive_entry* e;
  try {
    for (;;) {
      int rc = archive_read_next_header(a.get(), &e);
      if (rc == ARCHIVE_EOF) break;
      if (rc < ARCHIVE_WARN) throw Error(std::string("corrupt layer: ") + archive_why(a.get()));
      check_interrupted();
      applier.apply(a.get(), e);
    }
    applier.finish();
  } catch (Error& err) {
    err.add_trace("while extracting layer " + blob.string());
    throw;
  }
}

void decompress_layer(const fs::path& blob, const fs::path& out) {
  LayerReader a(blob, true);
  struct archive_entry* e;
  if (archive_read_next_header(a.get(), &e) != ARCHIVE_OK)
    throw Error("cannot read layer " + blob.string() + ": " + archive_why(a.get()));
  AtomicFile f(out);
  const void* buf;
  size_t len;
  la_int64_t offset;
  for (;;) {
    int rc = archive_read_data_block(a.get(), &buf, &len, &offset);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) throw Error("decompressing " + blob.string() + ": " + archive_why(a.get()));
    f.write(buf, len);
  }
  f.commit();
}

UncompressedDigest uncompressed_digest(const fs::path& blob) {
  LayerReader a(blob, true);
  struct archive_entry* e;
  if (archive_read_next_header(a.get(), &e) != ARCHIVE_OK)
    throw Error("cannot read layer " + blob.string() + ": " + archive_why(a.get()));
  Sha256 sha;
  uint64_t size = 0;
  const void* buf;
  size_t len;
  la_int64_t offset;
  for (;;) {
    int rc = archive_read_data_block(a.get(), &buf, &len, &offset);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) throw Error("decompressing " + blob.string() + ": " + archive_why(a.get()));
    sha.update(buf, len);
    size += len;
  }
  return {sha.finish(), size};
}

}  // namespace sb
