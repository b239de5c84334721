// Running code of another platform: QEMU user emulation through the kernel's
// binfmt_misc, in one of two ways.
//  - The machine's own entry qemu-<machine>, registered with the F (fix
//    binary) flag: the kernel opened the interpreter when it was registered,
//    so an aarch64 program exec'd inside the sandbox (another mount
//    namespace, no qemu in the image) runs under it with nothing else to do.
//    Debian's qemu-user-static and binfmt-support register it.
//  - Else the sandbox's own: since Linux 6.7 a user namespace may mount a
//    binfmt_misc instance of its own, seen by it and its children only. Where
//    the machine has the static interpreter (qemu-user-static's
//    /usr/bin/qemu-aarch64-static) and the kernel allows it, each sandbox of
//    another platform registers it there with the F flag before it enters its
//    root, and mounts the instance read-only: nothing on the host changes and
//    no host setup is needed. Never without a user namespace (that instance
//    would be the host's).
#pragma once

#include <filesystem>
#include <string>

namespace sb::sandbox {

namespace fs = std::filesystem;

// This machine's architecture in OCI's terms (amd64, arm64), from uname.
std::string host_architecture();

// The kernel's name of an OCI architecture: arm64 -> aarch64, amd64 -> x86_64.
std::string machine_of(const std::string& oci_architecture);

struct Emulation {
  bool native = false;      // this machine runs the architecture itself
  bool available = false;   // native, the machine's own entry, or the sandbox's
  std::string entry;        // /proc/sys/fs/binfmt_misc/qemu-aarch64 (below `root`)
  std::string interpreter;  // the entry's (/usr/libexec/qemu-binfmt/aarch64-binfmt-P) or the sandbox's
  // The sandbox registers `interpreter` in a binfmt_misc instance of its own
  // user namespace with this line (written to its `register` file).
  std::string sandbox_register;
  std::string problem;  // why not available: "no such entry", "disabled", "without the F flag"
};

// How code of `oci_architecture` runs here. `root` is where /proc and the
// static interpreter are looked for (a fake tree in tests); `sandbox_binfmt`
// whether this kernel gives a user namespace its own binfmt_misc
// (binfmt_misc_unavailable() by default: probed once).
Emulation emulation_for(const std::string& oci_architecture, const fs::path& root = "/",
                        const std::string& host = host_architecture(), int sandbox_binfmt = -1);

// The line that registers `interpreter` for ELF programs of `machine`
// (aarch64, x86_64) with the F flag; "" for a machine it does not know.
std::string binfmt_register_line(const std::string& machine, const std::string& interpreter);

// Why this process's sandboxes cannot mount a binfmt_misc of their own, ""
// when they can: tried once in a short-lived child (a user namespace, as the
// sandbox's); never with STACKBUILD_SANDBOX_USERNS=off.
std::string binfmt_misc_unavailable();

// What to tell a user whose machine cannot run `oci_architecture`:
// "linux/arm64 code needs QEMU user emulation, and <problem>; install ...".
std::string emulation_missing(const Emulation& e, const std::string& oci_architecture);

}  // namespace sb::sandbox
