// LinuxSandbox: clone() into new namespaces (a user namespace always, but in
// the weaker mode: identity.hpp), the setup (see setup_plan.hpp), then the
// confinement (no_new_privs and the seccomp filter: seccomp.hpp), then an exec
// of stackbuild-init (src/sandbox/init/) from a sealed memfd, which runs the
// command as its child; and the parent's wait with output streaming, a timeout
// and Ctrl-C.
//
// Process tree:  stackbuild ── stackbuild-init (PID 1 of a new PID namespace) ── command ── ...
// The init is exec'd with an empty environment and only the three files it
// needs, so nothing of stackbuild's memory, environment, arguments or open
// files is in the sandbox. It reaps everything and exits with the command's
// status; the kernel then kills what is left in the namespace before the init
// is reaped, so when run() returns, no process of the step is alive.
// PR_SET_PDEATHSIG on the init (SIGKILL when stackbuild dies) gives the same
// end when stackbuild is killed.
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "sandbox/emulation.hpp"
#include "sandbox/identity.hpp"
#include "sandbox/sandbox.hpp"
#include "sandbox/seccomp.hpp"
#include "sandbox/setup_plan.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/interrupt.hpp"

namespace sb::sandbox {

namespace {

using detail::Identity;
using detail::Op;
using detail::SetupPlan;

// What went wrong before the command ran, as the setup child or the init
// (src/sandbox/init/sandbox_init.c) reports it; an op's index otherwise.
constexpr int kOpExec = -1;      // the command could not be executed
constexpr int kOpIdentity = -2;  // setgroups/setgid/setuid failed
constexpr int kOpFork = -3;      // the init could not fork the command
constexpr int kOpInit = -4;      // stackbuild-init could not be executed
constexpr int kOpSpec = -5;      // the init could not read what to run
constexpr int kOpConfine = -6;   // no_new_privs or the seccomp filter could not be set

struct Report {
  int32_t op;
  int32_t err;
};

struct SetupArgs {
  const SetupPlan* plan;
  const sock_fprog* filter;  // null: no seccomp filter (STACKBUILD_SANDBOX_SECCOMP=off)
  int sync_fd, err_fd, out_fd, spec_fd, init_fd;
};

[[noreturn]] void report(int err_fd, int op, int err) {
  Report r{op, err};
  (void)!::write(err_fd, &r, sizeof r);
  ::_exit(127);
}

int mkdir_p(const char* path, unsigned mode) {
  char buf[PATH_MAX];
  size_t n = strnlen(path, sizeof buf);
  if (n >= sizeof buf) return ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; ++i) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (::mkdir(buf, mode) != 0 && errno != EEXIST) return errno;
    buf[i] = c;
  }
  return 0;
}

int loopback_up() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ::ioctl(s, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    rc = ::ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  int err = rc == 0 ? 0 : errno;
  ::close(s);
  return err;
}

// One operation of the plan; 0 or an errno. No allocation.
int run_op(const Op& op) {
  switch (op.kind) {
    case Op::Mount: {
      if (op.optional && ::access(op.b.c_str(), F_OK) != 0 && errno == ENOENT) return 0;
      const char* type = op.c.empty() ? nullptr : op.c.c_str();
      const char* data = op.data.empty() ? nullptr : op.data.c_str();
      if (::mount(op.a.c_str(), op.b.c_str(), type, op.flags, data) == 0) return 0;
      if (errno != EINVAL || op.fallback_data.empty()) return errno;
      return ::mount(op.a.c_str(), op.b.c_str(), type, op.flags, op.fallback_data.c_str()) == 0
                 ? 0
                 : errno;
    }
    case Op::BindRemount:
      if (op.optional && ::access(op.b.c_str(), F_OK) != 0 && errno == ENOENT) return 0;
      return ::mount(nullptr, op.b.c_str(), nullptr, MS_BIND | MS_REMOUNT | op.flags, nullptr) == 0
                 ? 0
                 : errno;
    case Op::Mkdir:
      if (::mkdir(op.b.c_str(), 0700) != 0 && errno != EEXIST) return errno;
      return ::chmod(op.b.c_str(), op.mode) == 0 ? 0 : errno;
    case Op::Touch: {
      int fd = ::open(op.b.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd < 0) return errno;
      ::close(fd);
      return 0;
    }
    case Op::Symlink:
      return ::symlink(op.a.c_str(), op.b.c_str()) == 0 ? 0 : errno;
    case Op::EnterRoot:
      if (::chdir(op.b.c_str()) != 0) return errno;
      if (::syscall(SYS_pivot_root, ".", ".") != 0) return errno;
      if (::umount2(".", MNT_DETACH) != 0) return errno;
      return ::chdir("/") == 0 ? 0 : errno;
    case Op::Hostname:
      return ::sethostname(op.a.c_str(), op.a.size()) == 0 ? 0 : errno;
    case Op::LoopbackUp:
      return loopback_up();
    case Op::Workdir:
      if (int e = mkdir_p(op.b.c_str(), op.mode)) return e;
      return ::chdir(op.b.c_str()) == 0 ? 0 : errno;
    case Op::Chdir:
      return ::chdir(op.b.c_str()) == 0 ? 0 : errno;
    case Op::Attach:
      return ::syscall(SYS_move_mount, op.fd, "", AT_FDCWD, op.b.c_str(),
                       MOVE_MOUNT_F_EMPTY_PATH) == 0
                 ? 0
                 : errno;
    case Op::Write: {
      int fd = ::open(op.b.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) return errno;
      ssize_t n = ::write(fd, op.a.data(), op.a.size());
      int err = n == static_cast<ssize_t>(op.a.size()) ? 0 : n < 0 ? errno : EIO;
      ::close(fd);
      return err;
    }
    case Op::BecomeRoot:
      // The maps are written: 0 is the range's first id. Until now the init
      // was the host's root (whose ids the namespace does not map), and its
      // supplementary groups go too.
      if (::setresgid(0, 0, 0) != 0 || ::setgroups(0, nullptr) != 0 || ::setresuid(0, 0, 0) != 0)
        return errno;
      return 0;
  }
  return EINVAL;
}

// Puts `fds` at 0, 1, 2 (whatever numbers they had) and marks every other
// file close-on-exec.
void standard_fds(int in, int out, int err) {
  int a = ::fcntl(in, F_DUPFD_CLOEXEC, 3), b = ::fcntl(out, F_DUPFD_CLOEXEC, 3),
      c = ::fcntl(err, F_DUPFD_CLOEXEC, 3);
  ::dup2(a, 0);
  ::dup2(b, 1);
  ::dup2(c, 2);
  ::syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
}

// The child of clone(): the setup ops, the confinement, then stackbuild-init.
int setup_main(void* p) {
  const SetupArgs& a = *static_cast<SetupArgs*>(p);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_DFL);
  ::umask(022);
  char go;
  if (::read(a.sync_fd, &go, 1) != 1) ::_exit(127);  // the parent gave up (or died)
  ::close(a.sync_fd);
  for (size_t i = 0; i < a.plan->ops.size(); ++i)
    if (int e = run_op(a.plan->ops[i])) report(a.err_fd, static_cast<int>(i), e);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // again: a change of user clears it
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) report(a.err_fd, kOpConfine, errno);
  if (a.filter && ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, a.filter) != 0)
    report(a.err_fd, kOpConfine, errno);
  standard_fds(a.spec_fd, a.out_fd, a.err_fd);
  static char name[] = "stackbuild-init";
  char* const argv[] = {name, nullptr};
  char* const envp[] = {nullptr};
  ::syscall(SYS_execveat, a.init_fd, "", argv, envp, AT_EMPTY_PATH);
  report(2, kOpInit, errno);
}

// stackbuild-init's bytes in a sealed memfd, made once per process.
int init_program_fd() {
  static std::once_flag once;
  static int fd = -1;
  static int err = 0;
  std::call_once(once, [] {
    const std::string_view bytes = detail::init_program();
#ifdef MFD_EXEC
    int f = ::memfd_create("stackbuild-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
    if (f < 0 && errno == EINVAL)
#else
    int f = -1;
#endif
      f = ::memfd_create("stackbuild-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0) {
      err = errno;
      return;
    }
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(f, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        err = n < 0 ? errno : EIO;
        ::close(f);
        return;
      }
      done += static_cast<size_t>(n);
    }
    if (::fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
      err = errno;
      ::close(f);
      return;
    }
    fd = f;
  });
  if (fd < 0) throw_errno("memfd_create (the sandbox's init)", err);
  return fd;
}

// What stackbuild-init runs, in its format (sandbox_init.c), in a memfd at offset 0.
UniqueFd init_spec(const SandboxSpec& spec, const SetupPlan& plan, Identity identity) {
  std::string b = "stackbuild-init-1";
  b += '\0';
  auto put = [&](const std::string& f) {
    if (f.find('\0') != std::string::npos)
      throw Error("sandbox: a NUL byte in the command or its environment: '" + f.substr(0, 40) + "'");
    b += f;
    b += '\0';
  };
  put(std::to_string(spec.uid));
  put(std::to_string(spec.gid));
  put(identity == Identity::Rootless ? "0" : "1");  // setgroups is denied to a rootless namespace
  put(std::to_string(spec.argv.size()));
  for (const auto& a : spec.argv) put(a);
  put(std::to_string(spec.env.size()));
  for (const auto& [k, v] : spec.env) put(k + "=" + v);
  put(std::to_string(plan.exe_candidates.size()));
  for (const auto& e : plan.exe_candidates) put(e);
  UniqueFd fd(::memfd_create("stackbuild-init-spec", MFD_CLOEXEC));
  if (fd.get() < 0) throw_errno("memfd_create (the sandbox's command)");
  write_all(fd.get(), b.data(), b.size(), "the sandbox's command");
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) throw_errno("lseek (the sandbox's command)");
  return fd;
}

bool seccomp_wanted() {
  const char* v = std::getenv("STACKBUILD_SANDBOX_SECCOMP");
  std::string s = v ? v : "";
  if (s.empty() || s == "on" || s == "1") return true;
  if (s == "off" || s == "0") return false;
  throw Error("STACKBUILD_SANDBOX_SECCOMP must be 'on' or 'off', not '" + s + "'");
}

void write_map(pid_t pid, const char* file, const std::string& text) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + file;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open " + path);
  write_all(fd.get(), text.data(), text.size(), path);
}

struct Pipe {
  UniqueFd r, w;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe");
    r.reset(fds[0]);
    w.reset(fds[1]);
  }
};

}  // namespace

SandboxResult LinuxSandbox::run(const SandboxSpec& spec, const OutputFn& output) {
  const Identity identity = detail::identity();
  std::string binfmt_register;
  if (!spec.architecture.empty()) {
    const Emulation e = emulation_for(spec.architecture);
    if (!e.available) throw Error(emulation_missing(e, spec.architecture));
    binfmt_register = e.sandbox_register;
  }
  SetupPlan plan = detail::make_setup_plan(spec, identity, binfmt_register);
  struct StubCleanup {
    const SetupPlan& p;
    ~StubCleanup() { detail::remove_stubs(p); }
  } cleanup{plan};

  detail::IdRange range;
  std::vector<UniqueFd> mounts;  // the detached mounts the init attaches
  if (identity == Identity::RootRange) {
    range = detail::root_id_range();
    if (spec.uid >= range.count || spec.gid >= range.count)
      throw Error("cannot become user " + std::to_string(spec.uid) + ":" + std::to_string(spec.gid) +
                  " in the sandbox: its user namespace maps ids 0 to " +
                  std::to_string(range.count - 1));
    const int userns = detail::idmap_userns(range);
    for (const auto& d : plan.detached) {
      mounts.emplace_back(detail::detached_mount(d.source, d.idmap, d.read_only, userns));
      plan.ops[d.op].fd = mounts.back().get();
    }
  }
  sock_fprog filter{};
  if (seccomp_wanted()) {
    const auto& program = detail::seccomp_program();
    filter.len = static_cast<unsigned short>(program.size());
    filter.filter = const_cast<sock_filter*>(program.data());
  }
  const int init_fd = init_program_fd();
  UniqueFd spec_fd = init_spec(spec, plan, identity);

  Pipe sync, err, out;
  SetupArgs args{&plan,        filter.filter ? &filter : nullptr, sync.r.get(), err.w.get(),
                 out.w.get(), spec_fd.get(),                     init_fd};

  int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD;
  if (!spec.network) flags |= CLONE_NEWNET;
  if (identity != Identity::HostRoot) flags |= CLONE_NEWUSER;
  const size_t stack_size = 256 << 10;
  void* stack = ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) throw_errno("mmap");
  pid_t pid = ::clone(setup_main, static_cast<char*>(stack) + stack_size, flags, &args);
  int clone_errno = errno;
  ::munmap(stack, stack_size);  // the child has its own copy of the address space
  if (pid < 0) throw_errno("clone (new namespaces for the build sandbox)", clone_errno);
  sync.r.reset();
  err.w.reset();
  out.w.reset();
  spec_fd.reset();
  mounts.clear();

  auto kill_and_reap = [&] {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  };
  try {
    if (identity == Identity::Rootless) {
      write_map(pid, "setgroups", "deny");
      write_map(pid, "uid_map", detail::id_map_line(::geteuid(), 1));
      write_map(pid, "gid_map", detail::id_map_line(::getegid(), 1));
    } else if (identity == Identity::RootRange) {
      write_map(pid, "uid_map", detail::id_map_line(range.uid, range.count));
      write_map(pid, "gid_map", detail::id_map_line(range.gid, range.count));
    }
    write_all(sync.w.get(), "x", 1, "the sandbox's start pipe");
  } catch (...) {
    kill_and_reap();
    throw;
  }
  sync.w.reset();

  using clock = std::chrono::steady_clock;
  const auto deadline = spec.timeout_seconds > 0
                            ? clock::now() + std::chrono::seconds(spec.timeout_seconds)
                            : clock::time_point::max();
  SandboxResult result;
  bool exited = false, eof = false, killed = false, stopped_by_interrupt = false;
  int wstatus = 0;
  char buf[65536];
  try {
    while (!exited || !eof) {
      if (!eof) {
        struct pollfd pfd {
          out.r.get(), POLLIN, 0
        };
        if (::poll(&pfd, 1, 100) > 0) {
          ssize_t n = ::read(out.r.get(), buf, sizeof buf);
          if (n > 0 && output) output(std::string_view(buf, static_cast<size_t>(n)));
          if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) eof = true;
        }
      } else {
        ::poll(nullptr, 0, 20);
      }
      if (!exited && ::waitpid(pid, &wstatus, WNOHANG) == pid) exited = true;
      if (exited || killed) continue;
      if (clock::now() >= deadline) {
        result.timed_out = killed = true;
        ::kill(pid, SIGKILL);
      } else if (interrupted()) {
        stopped_by_interrupt = killed = true;
        ::kill(pid, SIGKILL);
      }
    }
  } catch (...) {  // the output callback failed (say, the log's disk is full): end the step first
    if (!exited) kill_and_reap();
    throw;
  }
  if (stopped_by_interrupt) check_interrupted();

  Report r{0, 0};
  if (::read(err.r.get(), &r, sizeof r) == static_cast<ssize_t>(sizeof r)) {
    std::string why = std::strerror(r.err);
    if (r.op == kOpExec) throw Error("cannot run '" + spec.argv[0] + "' in the sandbox: " + why);
    if (r.op == kOpIdentity)
      throw Error("cannot become user " + std::to_string(spec.uid) + ":" +
                  std::to_string(spec.gid) + " in the sandbox: " + why +
                  (identity == Identity::Rootless ? " (without root only user 0 is mapped)" : ""));
    if (r.op == kOpFork) throw Error("the sandbox's init cannot fork: " + why);
    if (r.op == kOpInit) throw Error("cannot start the sandbox's init: " + why);
    if (r.op == kOpSpec) throw Error("the sandbox's init could not read its command: " + why);
    if (r.op == kOpConfine)
      throw Error("cannot confine the sandbox (no_new_privs, seccomp): " + why +
                  " (STACKBUILD_SANDBOX_SECCOMP=off runs without the filter)");
    if (r.op < 0 || static_cast<size_t>(r.op) >= plan.ops.size())
      throw Error("sandbox: an unknown failure report (" + std::to_string(r.op) + "): " + why);
    throw Error("sandbox: cannot " + plan.ops[static_cast<size_t>(r.op)].what + ": " + why);
  }
  result.exit_status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return result;
}

}  // namespace sb::sandbox
