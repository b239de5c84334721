#include "build/privileged.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "build/changeset.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb {

namespace {

constexpr const char* kCapability = "security.capability";

using Inode = std::pair<dev_t, ino_t>;

std::string capability_of(int fd) {
  ssize_t n = ::fgetxattr(fd, kCapability, nullptr, 0);
  if (n <= 0) return "";
  std::string v(static_cast<size_t>(n), '\0');
  n = ::fgetxattr(fd, kCapability, v.data(), v.size());
  v.resize(static_cast<size_t>(std::max<ssize_t>(n, 0)));
  return v;
}

class Taker {
 public:
  Taker(const PrivilegedFiles& inherited, const fs::path& inherited_tree) {
    for (const auto& [path, rec] : inherited)
      if (struct stat st; ::lstat((inherited_tree / path).c_str(), &st) == 0 && S_ISREG(st.st_mode))
        known_[{st.st_dev, st.st_ino}] = rec;
  }

  void walk(int dirfd, const std::string& rel) {
    DIR* d = ::fdopendir(::dup(dirfd));
    if (!d) throw_errno("opendir " + rel);
    std::vector<std::string> names;
    while (struct dirent* de = ::readdir(d)) {
      std::string n = de->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    ::closedir(d);
    for (const auto& name : names) {
      const std::string path = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_errno("stat " + path);
      if (S_ISDIR(st.st_mode)) {
        UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub.get() < 0) throw_errno("open " + path);
        walk(sub.get(), path);
      } else if (S_ISREG(st.st_mode)) {
        file(dirfd, name, path, st);
      }
    }
  }

  PrivilegedFiles out;

 private:
  void file(int dirfd, const std::string& name, const std::string& path, const struct stat& st) {
    // One of the inherited tree's inodes, or a hardlink to one taken before:
    // the bits are already off, the record says what they were.
    if (auto it = known_.find({st.st_dev, st.st_ino}); it != known_.end()) {
      out[path] = it->second;
      return;
    }
    const bool special = (st.st_mode & (S_ISUID | S_ISGID)) != 0;
    if (!special) {  // then only a capability makes it privileged: one call to look
      const std::string at = "/proc/self/fd/" + std::to_string(dirfd) + "/" + name;
      if (::lgetxattr(at.c_str(), kCapability, nullptr, 0) <= 0) return;
    }
    UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0) throw_errno("open " + path);
    const std::string cap = capability_of(fd.get());
    if (!special && cap.empty()) return;
    PrivilegedFile rec{static_cast<uint32_t>(st.st_mode & 07777), cap};
    if (!cap.empty() && ::fremovexattr(fd.get(), kCapability) != 0) throw_errno("remove the capability of " + path);
    if (::fchmod(fd.get(), st.st_mode & 07777 & ~static_cast<mode_t>(S_ISUID | S_ISGID)) != 0)
      throw_errno("chmod " + path);
    known_[{st.st_dev, st.st_ino}] = rec;
    out[path] = rec;
  }

  std::map<Inode, PrivilegedFile> known_;
};

std::string hex_encode(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

std::string hex_decode(const std::string& hex) {
  auto nibble = [&](char c) -> unsigned {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    throw Error("'" + hex + "' is not lowercase hex");
  };
  if (hex.size() % 2) throw Error("'" + hex + "' is not lowercase hex");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) out += static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1]));
  return out;
}

// The copy of `path` under `lower`, with its parents, made under `top` as
// overlayfs' copy-up would make it; returns its descriptor, open for writing.
UniqueFd copy_up(const std::string& path, const fs::path& top, const fs::path& lower) {
  fs::path sub;
  const fs::path rel(path);
  for (auto part = rel.begin(); part != rel.end(); ++part) {
    sub /= *part;
    struct stat st;
    if (::lstat((lower / sub).c_str(), &st) != 0) throw_errno("stat " + (lower / sub).string());
    if (std::next(part) == rel.end()) {
      if (!S_ISREG(st.st_mode)) throw Error(path + " is no longer a regular file in " + lower.string());
      break;
    }
    if (!S_ISDIR(st.st_mode)) throw Error("/" + sub.string() + " is not a directory in " + lower.string());
    struct stat made;
    if (::lstat((top / sub).c_str(), &made) == 0) {
      if (!S_ISDIR(made.st_mode)) throw Error((top / sub).string() + " is not a directory");
      continue;
    }
    copy_entry(lower / sub, top / sub);
  }
  if (struct stat st; ::lstat((top / rel).c_str(), &st) != 0) copy_entry(lower / rel, top / rel);
  UniqueFd fd(::open((top / rel).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open " + (top / rel).string());
  return fd;
}

}  // namespace

PrivilegedFiles take_privileged(const fs::path& tree, const PrivilegedFiles& inherited,
                                const fs::path& inherited_tree) {
  Taker t(inherited, inherited_tree);
  UniqueFd top(::open(tree.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (top.get() < 0) throw_errno("open " + tree.string());
  t.walk(top.get(), "");
  return std::move(t.out);
}

void restore_privileged(const PrivilegedFiles& files, const fs::path& top, const fs::path& lower) {
  for (const auto& [path, rec] : files) {
    UniqueFd fd = lower.empty() ? UniqueFd(::open((top / path).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC))
                                : copy_up(path, top, lower);
    struct stat st;
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
      throw Error("cannot give " + (top / path).string() + " its setuid, setgid or capability bits back");
    // Mode first (a chown after would clear the bits; there is none), then the capability.
    if (::fchmod(fd.get(), rec.mode) != 0) throw_errno("chmod " + (top / path).string());
    if (!rec.capability.empty() &&
        ::fsetxattr(fd.get(), kCapability, rec.capability.data(), rec.capability.size(), 0) != 0)
      throw_errno("set the capability of " + (top / path).string());
  }
}

std::string privileged_to_json(const PrivilegedFiles& files) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [path, rec] : files) {
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", rec.mode);
    nlohmann::json e = {{"mode", octal}};
    if (!rec.capability.empty()) e["capability"] = hex_encode(rec.capability);
    j[path] = e;
  }
  return j.dump(1) + "\n";
}

PrivilegedFiles privileged_from_json(const std::string& text, const std::string& where) {
  PrivilegedFiles out;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    for (const auto& [path, e] : j.items()) {
      if (path.empty() || path[0] == '/' || ("/" + path + "/").find("/../") != std::string::npos)
        throw Error("bad path '" + path + "'");
      PrivilegedFile rec;
      const std::string mode = e.at("mode").get<std::string>();
      if (mode.empty() || mode.size() > 4 || mode.find_first_not_of("01234567") != std::string::npos)
        throw Error("'" + path + "': mode '" + mode + "' is not octal");
      rec.mode = static_cast<uint32_t>(std::stoul(mode, nullptr, 8));
      if (e.contains("capability")) rec.capability = hex_decode(e.at("capability").get<std::string>());
      out[path] = rec;
    }
  } catch (const std::exception& e) {
    throw Error(where + ": not a record of privileged files: " + e.what());
  }
  return out;
}

}  // namespace sb
