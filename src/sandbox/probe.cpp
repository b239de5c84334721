// Whether this machine lets stackbuild use namespaces and overlayfs: each is
// tried once in a short-lived child, the way LinuxSandbox would use it.
#include <grp.h>
#include <linux/mount.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include "sandbox/emulation.hpp"
#include "sandbox/identity.hpp"
#include "sandbox/sandbox.hpp"
#include "sandbox/setup_plan.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::sandbox {

namespace {

// Runs `fn` in a forked child; its return value (an errno) comes back as the
// exit status. `fn` must not allocate (the parent may have threads).
template <class Fn>
int in_child(Fn fn) {
  pid_t pid = ::fork();
  if (pid < 0) return errno;
  if (pid == 0) ::_exit(fn());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return errno;
  return WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
}

int map_self(const std::string& setgroups, const std::string& uid_map, const std::string& gid_map) {
  auto put = [](const char* file, const std::string& text) {
    int fd = ::open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    int err =
        ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : errno;
    ::close(fd);
    return err;
  };
  if (int e = put("/proc/self/setgroups", setgroups)) return e;
  if (int e = put("/proc/self/uid_map", uid_map)) return e;
  return put("/proc/self/gid_map", gid_map);
}

std::string describe(const char* what, int err) {
  return err == 0 ? std::string() : std::string(what) + ": " + std::strerror(err);
}

}  // namespace

std::string namespaces_unavailable() {
  static std::once_flag once;
  static std::string answer;
  const detail::Identity id = detail::identity();
  std::call_once(once, [id] {
    bool user = id != detail::Identity::HostRoot;
    int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET |
                (user ? CLONE_NEWUSER : 0);
    int err = in_child([&] { return ::unshare(flags) == 0 ? 0 : errno; });
    answer = describe(id == detail::Identity::Rootless
                          ? "unshare (a user namespace, as stackbuild runs without root)"
                      : user ? "unshare (a user namespace, which the sandbox uses as root too; "
                               "STACKBUILD_SANDBOX_USERNS=off runs without one, as the host's root)"
                             : "unshare",
                      err);
  });
  return answer;
}

std::string overlay_unavailable(const fs::path& dir) {
  if (std::string ns = namespaces_unavailable(); !ns.empty()) return ns;
  // One answer per filesystem: the device of `dir` (the temporary directory's
  // when none is given).
  static std::mutex mutex;
  static std::map<dev_t, std::string> answers;
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  TempDir tmp(dir);
  struct stat st {};
  if (::stat(tmp.path().c_str(), &st) != 0)
    return "stat " + tmp.path().string() + ": " + std::strerror(errno);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = answers.find(st.st_dev); it != answers.end()) return it->second;
  const detail::Identity id = detail::identity();
  const bool user = id == detail::Identity::Rootless;
  for (const char* d : {"lower", "rw/upper", "rw/work", "merged", "ml", "mu"})
    fs::create_directories(tmp.path() / d);
  std::string merged = (tmp.path() / "merged").string();
  std::string uid_map = "0 " + std::to_string(::geteuid()) + " 1\n";
  std::string gid_map = "0 " + std::to_string(::getegid()) + " 1\n";
  int err = 0;
  if (id == detail::Identity::RootRange) {
    // As the sandbox does it: idmapped layers, mounted by the range's root.
    UniqueFd lower, rw;
    int userns = -1;
    try {
      userns = detail::idmap_userns(detail::root_id_range());
      lower.reset(detail::detached_mount(tmp.path() / "lower", true, true, userns));
      rw.reset(detail::detached_mount(tmp.path() / "rw", true, false, userns));
    } catch (const Error& e) {
      return e.what();
    }
    std::string options = detail::overlay_options({"ml"}, "mu/upper", "mu/work", true, false);
    fs::permissions(tmp.path(), fs::perms(0711));  // looked up from as the range's root
    const std::string at = tmp.path().string();
    err = in_child([&] {
      if (::setns(userns, CLONE_NEWUSER) != 0 || ::unshare(CLONE_NEWNS) != 0) return errno;
      if (::chdir(at.c_str()) != 0) return errno;
      if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
      if (::syscall(SYS_move_mount, lower.get(), "", AT_FDCWD, "ml", MOVE_MOUNT_F_EMPTY_PATH) != 0 ||
          ::syscall(SYS_move_mount, rw.get(), "", AT_FDCWD, "mu", MOVE_MOUNT_F_EMPTY_PATH) != 0)
        return errno;
      if (::setresgid(0, 0, 0) != 0 || ::setgroups(0, nullptr) != 0 || ::setresuid(0, 0, 0) != 0)
        return errno;
      return ::mount("overlay", "merged", "overlay", 0, options.c_str()) == 0 ? 0 : errno;
    });
  } else {
    std::string options = detail::overlay_options({tmp.path() / "lower"}, tmp.path() / "rw/upper",
                                                  tmp.path() / "rw/work", user, false);
    err = in_child([&] {
      if (::unshare(CLONE_NEWNS | (user ? CLONE_NEWUSER : 0)) != 0) return errno;
      if (user)
        if (int e = map_self("deny", uid_map, gid_map)) return e;
      if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
      return ::mount("overlay", merged.c_str(), "overlay", 0, options.c_str()) == 0 ? 0 : errno;
    });
  }
  std::string what = dir.empty() ? std::string("mount -t overlay")
                                 : "mount -t overlay, its upper layer in " + dir.string();
  return answers[st.st_dev] = describe(what.c_str(), err);
}

std::string binfmt_misc_unavailable() {
  if (detail::identity() == detail::Identity::HostRoot)
    return "the sandbox has no user namespace (STACKBUILD_SANDBOX_USERNS=off): its binfmt_misc would be the host's";
  static std::once_flag once;
  static std::string answer;
  std::call_once(once, [] {
    // As the sandbox does it: a binfmt_misc mounted in a new user and mount
    // namespace (an instance of that namespace's own since Linux 6.7; before,
    // the mount is refused), on a directory of its own.
    TempDir tmp;
    const std::string at = tmp.path().string();
    int err = in_child([&] {
      if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return errno;
      if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
      return ::mount("binfmt_misc", at.c_str(), "binfmt_misc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0
                 ? 0
                 : errno;
    });
    answer = describe("mount -t binfmt_misc in a user namespace (Linux 6.7 and later)", err);
  });
  return answer;
}

std::string LinuxSandbox::overlay_unavailable_in(const fs::path& dir) const {
  return overlay_unavailable(dir);
}

}  // namespace sb::sandbox
