// LinuxSandbox: clone() into new namespaces, the init's setup (see
// setup_plan.hpp), the command as the init's child, and the parent's wait
// with output streaming, a timeout and Ctrl-C.
//
// Process tree:  stackbuild ── init (PID 1 of a new PID namespace) ── command ── ...
// The init reaps everything and exits with the command's status; the kernel
// then kills what is left in the namespace before the init is reaped, so
// when run() returns, no process of the step is alive. PR_SET_PDEATHSIG on the
// init (SIGKILL when stackbuild dies) gives the same end when stackbuild is killed.
#include <fcntl.h>
#include <grp.h>
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
#include <cstring>

#include "sandbox/sandbox.hpp"
#include "sandbox/setup_plan.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/interrupt.hpp"

namespace sb::sandbox {

namespace {

using detail::Op;
using detail::SetupPlan;

constexpr int kOpExec = -1;      // the command could not be executed
constexpr int kOpIdentity = -2;  // setgid/setuid failed
constexpr int kOpFork = -3;      // the init could not fork the command

struct Report {
  int op;
  int err;
};

struct InitArgs {
  const SetupPlan* plan;
  char* const* argv;
  char* const* envp;
  int sync_fd, err_fd, out_fd, null_fd;
  uid_t uid;
  gid_t gid;
  bool user_namespace;
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
      const char* type = op.c.empty() ? nullptr : op.c.c_str();
      const char* data = op.data.empty() ? nullptr : op.data.c_str();
      if (::mount(op.a.c_str(), op.b.c_str(), type, op.flags, data) == 0) return 0;
      if (errno != EINVAL || op.fallback_data.empty()) return errno;
      return ::mount(op.a.c_str(), op.b.c_str(), type, op.flags, op.fallback_data.c_str()) == 0
                 ? 0
                 : errno;
    }
    case Op::BindRemount:
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
  }
  return EINVAL;
}

[[noreturn]] void exec_command(const InitArgs& a) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::dup2(a.null_fd, 0);
  ::dup2(a.out_fd, 1);
  ::dup2(a.out_fd, 2);
  ::setsid();
  ::umask(022);  // what a step's new files get does not depend on the caller's umask
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing of stackbuild's stays open across exec (the error pipe is already close-on-exec).
  ::syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
  if (!a.user_namespace && ::setgroups(0, nullptr) != 0) report(a.err_fd, kOpIdentity, errno);
  if (::setgid(a.gid) != 0 || ::setuid(a.uid) != 0) report(a.err_fd, kOpIdentity, errno);
  int err = ENOENT;
  for (const auto& exe : a.plan->exe_candidates) {
    ::execve(exe.c_str(), a.argv, a.envp);
    if (errno != ENOENT && errno != ENOTDIR) err = errno;
  }
  report(a.err_fd, kOpExec, err);
}

int init_main(void* p) {
  const InitArgs& a = *static_cast<InitArgs*>(p);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_DFL);
  ::umask(022);
  char go;
  if (::read(a.sync_fd, &go, 1) != 1) ::_exit(127);  // the parent gave up (or died)
  ::close(a.sync_fd);
  for (size_t i = 0; i < a.plan->ops.size(); ++i)
    if (int e = run_op(a.plan->ops[i])) report(a.err_fd, static_cast<int>(i), e);
  pid_t cmd = ::fork();
  if (cmd < 0) report(a.err_fd, kOpFork, errno);
  if (cmd == 0) exec_command(a);
  ::close(a.out_fd);
  for (;;) {
    int status = 0;
    pid_t w = ::waitpid(-1, &status, 0);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) ::_exit(127);
    if (w == cmd) ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
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
  const bool user_namespace = ::geteuid() != 0;
  SetupPlan plan = detail::make_setup_plan(spec, user_namespace);
  struct StubCleanup {
    const SetupPlan& p;
    ~StubCleanup() { detail::remove_stubs(p); }
  } cleanup{plan};

  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& s : spec.argv) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  Pipe sync, err, out;
  UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (null_fd.get() < 0) throw_errno("open /dev/null");
  InitArgs args{&plan,       argv.data(),   envp.data(), sync.r.get(), err.w.get(),
                out.w.get(), null_fd.get(), spec.uid,    spec.gid,     user_namespace};

  int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD;
  if (!spec.network) flags |= CLONE_NEWNET;
  if (user_namespace) flags |= CLONE_NEWUSER;
  const size_t stack_size = 256 << 10;
  void* stack = ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) throw_errno("mmap");
  pid_t pid = ::clone(init_main, static_cast<char*>(stack) + stack_size, flags, &args);
  int clone_errno = errno;
  ::munmap(stack, stack_size);  // the child has its own copy of the address space
  if (pid < 0) throw_errno("clone (new namespaces for the build sandbox)", clone_errno);
  sync.r.reset();
  err.w.reset();
  out.w.reset();

  auto kill_and_reap = [&] {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  };
  try {
    if (user_namespace) {
      write_map(pid, "setgroups", "deny");
      write_map(pid, "uid_map", "0 " + std::to_string(::geteuid()) + " 1\n");
      write_map(pid, "gid_map", "0 " + std::to_string(::getegid()) + " 1\n");
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
                  (user_namespace ? " (without root only user 0 is mapped)" : ""));
    if (r.op == kOpFork) throw Error("the sandbox's init cannot fork: " + why);
    throw Error("sandbox: cannot " + plan.ops[static_cast<size_t>(r.op)].what + ": " + why);
  }
  result.exit_status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return result;
}

}  // namespace sb::sandbox
