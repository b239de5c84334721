// Internal to sandbox/: what the sandbox's init does before the command, as a
// list of system calls prepared by the parent. The init runs between clone()
// and exec in a process that may have been cloned from a multithreaded one,
// so it must not allocate: every path and option string is built here, in the
// parent, and the init only calls the kernel with them.
#pragma once

#include <string>
#include <string_view>
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
    Chdir,        // chdir(b)
    Attach,       // move_mount(fd, "", AT_FDCWD, b): a detached mount the parent made (Detached)
    BecomeRoot,   // setresgid/setgroups/setresuid to 0 of the user namespace's range
    Write,        // open(b, O_WRONLY) and write(a): a kernel interface's file
  };
  Kind kind;
  std::string a, b, c, data;
  unsigned long flags = 0;
  unsigned mode = 0755;
  std::string what;           // for the error message when it fails
  std::string fallback_data;  // Mount: tried with this data when `data` gets EINVAL
  bool optional = false;      // ENOENT is not an error (a /proc path this kernel lacks)
  int fd = -1;                // Attach: set by the parent once it has made the mount
};

// A mount the parent makes with open_tree() before the sandbox starts, and
// the init attaches with an Attach op: as root, every host directory the
// sandbox sees goes through one, idmapped to the sandbox's user namespace
// where it is written (the root, its layers, rw binds), so that the files keep
// the image's owners on disk while the sandbox's root is an unprivileged
// user of the host.
struct Detached {
  fs::path source;
  bool idmap = false;
  bool read_only = false;
  size_t op = 0;  // the Attach op that takes it
};

// Who the sandbox's root is on the host.
enum class Identity {
  HostRoot,   // stackbuild runs as root and was told not to use a user namespace
  RootRange,  // stackbuild runs as root: a user namespace maps 0.. to a range of unprivileged ids
  Rootless,   // stackbuild runs as a user: a user namespace maps 0 to that user
};

struct SetupPlan {
  std::vector<Op> ops;  // in order
  std::vector<std::string>
      exe_candidates;             // argv[0] resolved against the step's PATH, tried in order
  fs::path mountpoint;            // where the root is assembled (an empty directory)
  std::vector<fs::path> lower;    // overlay: the stubs first, then spec.lower top to bottom
  std::vector<fs::path> created;  // root mode: stubs made in spec.root, to remove after
  std::vector<Detached> detached; // RootRange: the mounts the parent makes for Attach ops
};

// Creates the mount point stubs (an extra lower layer for overlay, entries in
// spec.root otherwise) and the operations. Throws sb::Error for a spec that
// cannot be honoured (a mount target through a symlink, a missing source).
// The init's first op is a chdir into spec.scratch, and every path after it is
// relative to that (the mount point is "root"): with Identity::RootRange the
// init drops to the range's root before mounting, and may then not be able to
// look up the store's private directories by their absolute paths.
// `binfmt_register`: a line for the register file of a binfmt_misc the
// sandbox mounts in its own user namespace (emulation.hpp), "" for none.
SetupPlan make_setup_plan(const SandboxSpec& spec, Identity identity, const std::string& binfmt_register = "");

// Root mode: removes the stubs make_setup_plan() created, if still empty.
void remove_stubs(const SetupPlan& plan);

// stackbuild-init's bytes (generated/sandbox_init.cpp, made by CMakeLists.txt).
std::string_view init_program();

// The overlay mount's options for `lower` (top first), upper and work.
std::string overlay_options(const std::vector<fs::path>& lower, const fs::path& upper,
                            const fs::path& work, bool user_namespace, bool extra_features_off);

}  // namespace sb::sandbox::detail
