// Running code of another platform: QEMU user emulation through the kernel's
// binfmt_misc. With an entry qemu-<machine> registered with the F (fix
// binary) flag, the kernel opened the interpreter when it was registered, so
// an aarch64 program exec'd inside the sandbox (another mount namespace, no
// qemu in the image) runs under it with nothing else to do. Without one,
// stackbuild does not register it (that is the machine's setup: Debian's
// qemu-user-static and binfmt-support do it) and says so.
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
  bool available = false;   // native, or a qemu-<machine> entry enabled with the F flag
  std::string entry;        // /proc/sys/fs/binfmt_misc/qemu-aarch64 (below `root`)
  std::string interpreter;  // what the entry names: /usr/libexec/qemu-binfmt/aarch64-binfmt-P
  std::string problem;      // why not available: "no such entry", "disabled", "without the F flag"
};

// How code of `oci_architecture` runs here. `root` is where /proc is looked
// for (a fake tree in tests).
Emulation emulation_for(const std::string& oci_architecture, const fs::path& root = "/",
                        const std::string& host = host_architecture());

// What to tell a user whose machine cannot run `oci_architecture`:
// "linux/arm64 code needs QEMU user emulation, and <problem>; install ...".
std::string emulation_missing(const Emulation& e, const std::string& oci_architecture);

}  // namespace sb::sandbox
