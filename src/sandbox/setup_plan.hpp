// Internal to sandbox/: what the sandbox's init does before the command, as a
// list of system calls prepared by the parent. The init runs between clone()
// and exec in a process that may have been cloned from a multithreaded one,
// so it must not allocate: every path and option string is built here, in the
// parent, and the init only calls the kernel with them.
#pragma once

#include <string>
#include <vector>

#include "sandbox/sandbox.hpp"

namespace sb::sandbox::detail {

struct Op {
  enum Kind {
    Mount,        // mount(a, b, c, flags, data)
    BindRemount,  // mount(nullptr, b, nullptr, MS_BIND|MS_REMOUNT|flags, nullptr)
    Mkdir,        // mkdir(b, mode)
    Touch,        // open(b, O_CREAT) and close
    Symlink,      // symlink(a, b)
    EnterRoot,    // chdir(b); pivot_root(".", "."); umount2(".", MNT_DETACH); chdir("/")
    Hostname,     // sethostname(a)
    LoopbackUp,   // bring "lo" up in the new network namespace
    Workdir,      // mkdir -p b (inside the new root), then chdir(b)
  };
  Kind kind;
  std::string a, b, c, data;
  unsigned long flags = 0;
  unsigned mode = 0755;
  std::string what;           // for the error message when it fails
  std::string fallback_data;  // Mount: tried with this data when `data` gets EINVAL
};

struct SetupPlan {
  std::vector<Op> ops;  // in order
  std::vector<std::string>
      exe_candidates;             // argv[0] resolved against the step's PATH, tried in order
  fs::path mountpoint;            // where the root is assembled (an empty directory)
  std::vector<fs::path> lower;    // overlay: the stubs first, then spec.lower top to bottom
  std::vector<fs::path> created;  // root mode: stubs made in spec.root, to remove after
};

// Creates the mount point stubs (an extra lower layer for overlay, entries in
// spec.root otherwise) and the operations. Throws sb::Error for a spec that
// cannot be honoured (a mount target through a symlink, a missing source).
SetupPlan make_setup_plan(const SandboxSpec& spec, bool user_namespace);

// Root mode: removes the stubs make_setup_plan() created, if still empty.
void remove_stubs(const SetupPlan& plan);

// The overlay mount's options for `lower` (top first), upper and work.
std::string overlay_options(const std::vector<fs::path>& lower, const fs::path& upper,
                            const fs::path& work, bool user_namespace, bool extra_features_off);

}  // namespace sb::sandbox::detail
