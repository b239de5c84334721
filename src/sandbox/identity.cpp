// Who the sandbox's root is on the host (see identity.hpp).
#include "sandbox/identity.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::sandbox::detail {

namespace {

constexpr const char* kWeaker =
    "set STACKBUILD_SANDBOX_USERNS=off to run foreign code as the host's root instead (weaker: "
    "docs/security.md)";

}  // namespace

Identity identity() {
  if (::geteuid() != 0) return Identity::Rootless;
  const char* v = std::getenv("STACKBUILD_SANDBOX_USERNS");
  std::string s = v ? v : "";
  if (s.empty() || s == "on" || s == "1") return Identity::RootRange;
  if (s == "off" || s == "0") return Identity::HostRoot;
  throw Error("STACKBUILD_SANDBOX_USERNS must be 'on' or 'off', not '" + s + "'");
}

std::optional<std::pair<uint32_t, uint32_t>> subid_range(const std::string& text,
                                                           const std::string& user,
                                                           const std::string& uid) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string name = line.substr(0, a);
    if (name != user && name != uid) continue;
    char* end = nullptr;
    errno = 0;
    unsigned long start = std::strtoul(line.c_str() + a + 1, &end, 10);
    if (errno || *end != ':') continue;
    unsigned long count = std::strtoul(line.c_str() + b + 1, &end, 10);
    if (errno || (*end && *end != '\r') || count == 0 || start == 0 ||
        start + count > 0xFFFFFFFFul)
      continue;
    return std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(start),
                                         static_cast<uint32_t>(count));
  }
  return std::nullopt;
}

IdRange root_id_range(const fs::path& subuid, const fs::path& subgid) {
  auto u = subid_range(read_file_or_empty(subuid), "root", "0");
  auto g = subid_range(read_file_or_empty(subgid), "root", "0");
  if (!u || !g) return kDefaultRange;
  IdRange r{u->first, g->first, std::min({u->second, g->second, 65536u})};
  return r;
}

std::string id_map_line(uint32_t start, uint32_t count) {
  return "0 " + std::to_string(start) + " " + std::to_string(count) + "\n";
}

namespace {

int wait_for_kill(void*) {
  for (;;) ::pause();
}

void write_text(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open " + path);
  write_all(fd.get(), text.data(), text.size(), path);
}

}  // namespace

int idmap_userns(const IdRange& range) {
  static std::mutex mutex;
  static int fd = -1;
  static IdRange made{};
  std::lock_guard<std::mutex> lock(mutex);
  if (fd >= 0 && made.uid == range.uid && made.gid == range.gid && made.count == range.count)
    return fd;
  // A child in a new user namespace that waits while its maps are written
  // and its namespace is opened; the namespace outlives it through the fd.
  const size_t stack_size = 64 << 10;
  void* stack = ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) throw_errno("mmap");
  pid_t pid = ::clone(wait_for_kill, static_cast<char*>(stack) + stack_size,
                      CLONE_NEWUSER | SIGCHLD, nullptr);
  int clone_errno = errno;
  ::munmap(stack, stack_size);
  if (pid < 0)
    throw Error(std::string("cannot make a user namespace for the sandbox: ") +
                std::strerror(clone_errno) + "; " + kWeaker);
  auto reap = [&] {  // the child holds the pipe's write end too: no EOF comes
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  };
  int ns = -1;
  try {
    const std::string proc = "/proc/" + std::to_string(pid) + "/";
    write_text(proc + "uid_map", id_map_line(range.uid, range.count));
    write_text(proc + "gid_map", id_map_line(range.gid, range.count));
    ns = ::open((proc + "ns/user").c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) throw_errno("open " + proc + "ns/user");
  } catch (...) {
    reap();
    throw;
  }
  reap();
  if (fd >= 0) ::close(fd);
  fd = ns;
  made = range;
  return fd;
}

int detached_mount(const fs::path& source, bool idmap, bool read_only, int userns) {
  UniqueFd fd(static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, source.c_str(),
                                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)));
  if (fd.get() < 0) throw_errno("open_tree " + source.string() + " (a mount for the sandbox)");
  struct mount_attr attr {};
  if (read_only) attr.attr_set |= MOUNT_ATTR_RDONLY;
  if (idmap) {
    attr.attr_set |= MOUNT_ATTR_IDMAP;
    attr.userns_fd = static_cast<uint64_t>(userns);
  }
  if (attr.attr_set &&
      ::syscall(SYS_mount_setattr, fd.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) {
    int e = errno;
    if (idmap)
      throw Error("cannot make an idmapped mount of " + source.string() + " for the sandbox: " +
                  std::strerror(e) +
                  " (the kernel, or that filesystem, has no idmapped mounts: overlayfs has none, "
                  "as for a store inside a container's own root); put the store (--store) on a "
                  "filesystem that has them (ext4, xfs, btrfs, tmpfs), or " + kWeaker);
    throw_errno("make the mount of " + source.string() + " read-only", e);
  }
  return fd.release();
}

}  // namespace sb::sandbox::detail
