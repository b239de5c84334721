#include "sandbox/emulation.hpp"

#include <sys/utsname.h>

#include <cstdlib>
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

std::string binfmt_register_line(const std::string& machine, const std::string& interpreter) {
  // ELF's identification and e_type (an executable or a shared object:
  // 0xfe in the mask), then e_machine; the magic and mask binfmt-support's
  // qemu entries use. binfmt_misc decodes the \x escapes itself.
  const char* magic = nullptr;
  const char* mask = nullptr;
  if (machine == "aarch64") {
    magic = R"(\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00)";
    mask = R"(\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff)";
  } else if (machine == "x86_64") {
    magic = R"(\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00)";
    mask = R"(\xff\xff\xff\xff\xff\xfe\xfe\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff)";
  }
  if (!magic || interpreter.empty() || interpreter.find(':') != std::string::npos) return "";
  return ":qemu-" + machine + ":M::" + magic + ":" + mask + ":" + interpreter + ":F";
}

namespace {

// The machine's own entry for `machine`, read into `e`.
void read_entry(Emulation& e, const fs::path& root, const std::string& machine) {
  e.entry = "/proc/sys/fs/binfmt_misc/qemu-" + machine;
  std::ifstream in(root / e.entry.substr(1));
  if (!in) {
    e.problem = "binfmt_misc has no " + e.entry;
    return;
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
}

}  // namespace

Emulation emulation_for(const std::string& arch, const fs::path& root, const std::string& host, int sandbox_binfmt) {
  Emulation e;
  if (arch == host) {
    e.native = e.available = true;
    return e;
  }
  const std::string machine = machine_of(arch);
  read_entry(e, root, machine);
  if (e.available) return e;

  // The sandbox's own entry: the static interpreter (STACKBUILD_QEMU_DIR, by
  // default qemu-user-static's /usr/bin), and a kernel that allows it.
  const char* dir = std::getenv("STACKBUILD_QEMU_DIR");
  const fs::path interpreter = fs::path(dir && *dir ? dir : "/usr/bin") / ("qemu-" + machine + "-static");
  std::error_code ec;
  if (!fs::is_regular_file(root / interpreter.relative_path(), ec)) {
    e.problem += ", and there is no " + interpreter.string() + " for the sandbox to register";
    return e;
  }
  const std::string line = binfmt_register_line(machine, interpreter.string());
  std::string why = line.empty() ? "stackbuild knows no ELF magic for " + machine
                    : sandbox_binfmt == 1 ? ""
                    : sandbox_binfmt == 0 ? "the kernel gives a user namespace no binfmt_misc of its own"
                                          : binfmt_misc_unavailable();
  if (!why.empty()) {
    e.problem += ", and the sandbox cannot register " + interpreter.string() + " itself (" + why + ")";
    return e;
  }
  e.available = true;
  e.problem.clear();
  e.interpreter = interpreter.string();
  e.sandbox_register = line;
  return e;
}

std::string emulation_missing(const Emulation& e, const std::string& arch) {
  return "linux/" + arch + " code needs QEMU user emulation on this linux/" + host_architecture() + " machine, and " +
         e.problem + "; install Debian's qemu-user-static (apt-get install qemu-user-static: on Linux 6.7 and later "
         "the sandbox registers it in a binfmt_misc of its own; before, binfmt-support registers qemu-" +
         machine_of(arch) + " with the F flag for the machine), or run it on a linux/" + arch + " machine";
}

}  // namespace sb::sandbox
