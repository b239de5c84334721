// The sandbox's seccomp filter (see seccomp.hpp), built with libseccomp.
#include "sandbox/seccomp.hpp"

#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::sandbox::detail {

namespace {

// Refused with EPERM, whatever the arguments.
const std::vector<const char*> kDenied = {
    // kernel modules, kexec, BPF, performance counters, the keyring
    "init_module", "finit_module", "delete_module", "create_module", "query_module",
    "get_kernel_syms", "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "keyctl",
    "add_key", "request_key", "userfaultfd",
    // mounting and namespaces
    "mount", "umount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick",
    "open_tree", "move_mount", "mount_setattr", "unshare", "setns",
    // reaching host files by handle
    "open_by_handle_at", "name_to_handle_at",
    // the machine: clock, swap, reboot, accounting, quota, kernel log, I/O ports
    "settimeofday", "stime", "clock_settime", "clock_adjtime", "adjtimex", "swapon", "swapoff",
    "reboot", "acct", "quotactl", "quotactl_fd", "syslog", "iopl", "ioperm", "vhangup",
    // obsolete or unsafe
    "uselib", "sysfs", "_sysctl", "ustat", "nfsservctl", "lookup_dcookie", "vm86", "vm86old",
    "fanotify_init",
    // io_uring runs system calls the filter never sees
    "io_uring_setup", "io_uring_enter", "io_uring_register"};

struct Ctx {
  scmp_filter_ctx c;
  ~Ctx() { seccomp_release(c); }
};

void check(int rc, const std::string& what) {
  if (rc < 0) throw Error("seccomp: cannot " + what + ": " + std::strerror(-rc));
}

std::vector<sock_filter> build() {
  Ctx ctx{seccomp_init(SCMP_ACT_ALLOW)};
  if (!ctx.c) throw Error("seccomp: cannot make a filter (libseccomp)");
  // A 32-bit program gets the same rules, not SIGSYS for its every call.
#if defined(__x86_64__)
  for (uint32_t arch : {SCMP_ARCH_X86, SCMP_ARCH_X32}) {
    int rc = seccomp_arch_add(ctx.c, arch);
    if (rc < 0 && rc != -EEXIST) check(rc, "add an architecture");
  }
#elif defined(__aarch64__)
  if (int rc = seccomp_arch_add(ctx.c, SCMP_ARCH_ARM); rc < 0 && rc != -EEXIST)
    check(rc, "add an architecture");
#endif
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    check(seccomp_rule_add(ctx.c, SCMP_ACT_ERRNO(EPERM), nr, 0), std::string("refuse ") + name);
  }
  // clone3's flags sit in memory a filter cannot read: ENOSYS makes libc use clone.
  check(seccomp_rule_add(ctx.c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0), "refuse clone3");
  // clone with any CLONE_NEW* flag (its flags are the first argument here; on
  // s390 the second, which stackbuild does not build for).
  for (uint64_t flag : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                        CLONE_NEWNET, CLONE_NEWCGROUP})
    check(seccomp_rule_add(ctx.c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)),
          "refuse clone of namespaces");
  // The filter is the sandbox's own: no_new_privs is set by the init.
  check(seccomp_attr_set(ctx.c, SCMP_FLTATR_CTL_NNP, 0), "leave no_new_privs to the init");

  UniqueFd fd(::memfd_create("stackbuild-seccomp", MFD_CLOEXEC));
  if (fd.get() < 0) throw_errno("memfd_create (the seccomp filter)");
  check(seccomp_export_bpf(ctx.c, fd.get()), "export the filter");
  off_t size = ::lseek(fd.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0)
    throw Error("seccomp: the exported filter has a bad size (" + std::to_string(size) + ")");
  std::vector<sock_filter> program(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(fd.get(), program.data(), static_cast<size_t>(size), 0) != size)
    throw_errno("read the seccomp filter back");
  return program;
}

}  // namespace

const std::vector<sock_filter>& seccomp_program() {
  static std::once_flag once;
  static std::vector<sock_filter> program;
  std::call_once(once, [] { program = build(); });
  return program;
}

const std::vector<const char*>& seccomp_denied() { return kDenied; }

}  // namespace sb::sandbox::detail
