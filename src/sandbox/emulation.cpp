#include "sandbox/emulation.hpp"

#include <sys/utsname.h>

#include <fstream>
#include <sstream>

namespace sb::sandbox {

std::string host_architecture() {
  struct utsname u {};
  ::uname(&u);
  std::string m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64") return "arm64";
  return m;
}

std::string machine_of(const std::string& a) {
  if (a == "amd64") return "x86_64";
  if (a == "arm64") return "aarch64";
  return a;
}

Emulation emulation_for(const std::string& arch, const fs::path& root, const std::string& host) {
  Emulation e;
  if (arch == host) {
    e.native = e.available = true;
    return e;
  }
  e.entry = "/proc/sys/fs/binfmt_misc/qemu-" + machine_of(arch);
  std::ifstream in(root / e.entry.substr(1));
  if (!in) {
    e.problem = "binfmt_misc has no " + e.entry;
    return e;
  }
  std::string line;
  bool enabled = false, fix_binary = false;
  while (std::getline(in, line)) {
    if (line == "enabled") enabled = true;
    if (line.rfind("interpreter ", 0) == 0) e.interpreter = line.substr(12);
    if (line.rfind("flags:", 0) == 0) fix_binary = line.find('F', 6) != std::string::npos;
  }
  if (!enabled)
    e.problem = e.entry + " is disabled";
  else if (!fix_binary)
    e.problem = e.entry + " lacks the F flag (the interpreter must be opened when registered, to serve "
                "inside the sandbox)";
  else
    e.available = true;
  return e;
}

std::string emulation_missing(const Emulation& e, const std::string& arch) {
  return "linux/" + arch + " code needs QEMU user emulation on this linux/" + host_architecture() + " machine, and " +
         e.problem + "; install Debian's qemu-user-static and binfmt-support (apt-get install qemu-user-static " +
         "binfmt-support), which register qemu-" + machine_of(arch) + " with the F flag, or run it on a linux/" + arch +
         " machine";
}

}  // namespace sb::sandbox
