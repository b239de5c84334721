// The build sandbox: one command in a root made of read-only lower
// directories (overlayfs) and a writable upper directory, isolated from the
// host by Linux namespaces (mount, PID, IPC, UTS, and network unless asked),
// with a fresh minimal /dev, /proc and a /tmp of its own.
//
// What to run and how is plain data (SandboxSpec); Sandbox is an interface so
// that the build stage's orchestration is tested with a fake (as ninja's
// FakeCommandRunner). LinuxSandbox is the real one: clone() into new
// namespaces, mount(), pivot_root(), then the command as the child of an init
// process that is PID 1 of the new PID namespace. When the command ends, the
// init ends, and the kernel kills whatever else is left in the namespace; when
// stackbuild dies, PR_SET_PDEATHSIG kills the init, with the same effect.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sb::sandbox {

namespace fs = std::filesystem;

// A host directory (or file) made visible at `target` inside the root.
struct Mount {
  fs::path source;
  std::string target;  // absolute path inside the root
  bool read_only = true;
};

struct SandboxSpec {
  // The root. Overlay: `lower` (bottom first, never written) under `upper`,
  // with `work` an empty directory on the same filesystem as `upper`. Without
  // overlay: `root` alone, a directory the command may change (the copy
  // fallback, see build/changeset.hpp).
  std::vector<fs::path> lower;
  fs::path upper, work;
  fs::path root;
  // A directory for the sandbox's own files (the mount point stubs), removed
  // by the caller; on the same filesystem as `upper` is best.
  fs::path scratch;

  std::vector<Mount> mounts;
  // Device nodes of the host bound into the fresh /dev, by name.
  std::vector<std::string> devices = {"null", "zero", "full", "random", "urandom", "tty"};
  // The host node bound for a device where it is not /dev/<name> (a CDI
  // spec's hostPath): name -> host path.
  std::map<std::string, fs::path> device_sources;
  // Symlinks made in the fresh /dev after its nodes: name (as for devices,
  // "dri/by-path/pci-0000:3b:00.0-card") -> target, as written ("../card1").
  std::vector<std::pair<std::string, std::string>> device_links;
  std::vector<std::string> argv;           // argv[0]: an absolute path, or looked up in env's PATH
  std::map<std::string, std::string> env;  // the whole environment
  std::string cwd = "/";                   // created when missing (as a Dockerfile's WORKDIR)
  uint32_t uid = 0, gid = 0;
  int64_t timeout_seconds = 0;  // 0: none
  bool network = false;         // share the host's network and resolv.conf
  std::string hostname = "stackbuild";
  // The OCI architecture of the code it runs ("" or the host's: native).
  // Another runs under QEMU user emulation (emulation.hpp): the machine's
  // binfmt_misc entry, or one the sandbox registers in its own; run() throws
  // sb::Error naming what to install when there is neither.
  std::string architecture;
  fs::path host_resolv_conf = "/etc/resolv.conf";
};

struct SandboxResult {
  int exit_status = -1;  // 0..255, or 128+signal
  bool timed_out = false;
};

// Receives the command's output (stdout and stderr merged) as it comes.
using OutputFn = std::function<void(std::string_view)>;

class Sandbox {
 public:
  virtual ~Sandbox() = default;
  virtual SandboxResult run(const SandboxSpec& spec, const OutputFn& output) = 0;
  // Why an overlay root cannot have its upper and work directories in `dir`
  // ("" when it can), for callers that pick where those go.
  virtual std::string overlay_unavailable_in(const fs::path& dir) const {
    (void)dir;
    return "";
  }
};

class LinuxSandbox final : public Sandbox {
 public:
  SandboxResult run(const SandboxSpec& spec, const OutputFn& output) override;
  std::string overlay_unavailable_in(const fs::path& dir) const override;
};

// Why namespaces or overlayfs cannot be used here, "" when they can. Starts a
// short-lived process that tries them (as run() would), once per process, and
// for overlayfs once per filesystem: with `dir`, the upper and work
// directories are made in it (overlayfs takes no overlayfs as its upper
// layer: a store inside a container's own root cannot hold one); without, in
// the temporary directory.
std::string namespaces_unavailable();
std::string overlay_unavailable(const fs::path& dir = {});

}  // namespace sb::sandbox
