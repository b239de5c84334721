// Internal to sandbox/: the seccomp filter every sandboxed process runs
// under, built once with libseccomp and handed to the init as a classic BPF
// program (installed between the setup and the exec of stackbuild-init, so
// nothing is allocated there).
//
// What it refuses is what Docker's default profile refuses to a container
// without extra capabilities (moby's profiles/seccomp/default.json): loading
// kernel modules and kexec, bpf, perf_event_open, the keyring (keyctl,
// add_key, request_key), userfaultfd, mounting (mount, umount2, pivot_root,
// the new mount API), new namespaces (unshare, setns, clone with CLONE_NEW*;
// clone3 answers ENOSYS so that libc falls back to clone, whose flags a filter
// can read), open_by_handle_at (the "shocker" escape), the clock, swap,
// reboot, acct, quotactl, personality changes other than Linux's, and the
// obsolete calls (uselib, sysfs, ustat, nfsservctl...). Each answers EPERM
// (ENOSYS for clone3), as Docker's does; everything else is allowed. The
// filter covers the native ABI and, on x86-64, the i386 and x32 ones, so a
// 32-bit program meets the same rules rather than being killed.
#pragma once

#include <linux/filter.h>

#include <vector>

namespace sb::sandbox::detail {

// The program, built on first use (throws sb::Error when libseccomp fails).
const std::vector<sock_filter>& seccomp_program();

// The names of the system calls the filter refuses (for docs and tests).
const std::vector<const char*>& seccomp_denied();

}  // namespace sb::sandbox::detail
