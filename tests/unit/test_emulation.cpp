// Whether code of another platform can run here (sandbox/emulation.hpp),
// read from fake /proc/sys/fs/binfmt_misc trees.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "sandbox/emulation.hpp"

using namespace sb;
using namespace sb::sandbox;

namespace {

void entry(const fs::path& root, const std::string& text) {
  test::write(root / "proc/sys/fs/binfmt_misc/qemu-aarch64", text);
}

const char* kDebian =
    "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: POCF\noffset 0\n"
    "magic 7f454c460201010000000000000000000200b700\nmask ffffffffffffff00fffffffffffffffffeffffff\n";

}  // namespace

TEST_CASE("emulation: the host's own architecture is native, another needs qemu-<machine> with F", "[emulation]") {
  TempDir tmp;
  CHECK(emulation_for("amd64", tmp.path(), "amd64").native);
  CHECK(emulation_for("arm64", tmp.path(), "arm64").available);
  CHECK(machine_of("arm64") == "aarch64");
  CHECK(machine_of("amd64") == "x86_64");

  Emulation none = emulation_for("arm64", tmp.path(), "amd64", 1);
  CHECK_FALSE(none.native);
  CHECK_FALSE(none.available);
  CHECK(none.problem == "binfmt_misc has no /proc/sys/fs/binfmt_misc/qemu-aarch64, and there is no "
                       "/usr/bin/qemu-aarch64-static for the sandbox to register");
  std::string msg = emulation_missing(none, "arm64");
  CHECK_THAT(msg, Catch::Contains("linux/arm64 code needs QEMU user emulation") &&
                      Catch::Contains("install Debian's qemu-user-static") && Catch::Contains("binfmt-support"));

  entry(tmp.path(), kDebian);
  Emulation ok = emulation_for("arm64", tmp.path(), "amd64");
  CHECK(ok.available);
  CHECK(ok.interpreter == "/usr/libexec/qemu-binfmt/aarch64-binfmt-P");

  entry(tmp.path(), "disabled\ninterpreter /usr/bin/qemu-aarch64\nflags: F\n");
  CHECK_FALSE(emulation_for("arm64", tmp.path(), "amd64").available);
  CHECK_THAT(emulation_for("arm64", tmp.path(), "amd64").problem, Catch::Contains("is disabled"));

  // Without F the kernel opens the interpreter at exec, in the sandbox's
  // namespace, where the image has no qemu: refused.
  entry(tmp.path(), "enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: OC\n");
  CHECK_FALSE(emulation_for("arm64", tmp.path(), "amd64").available);
  CHECK_THAT(emulation_for("arm64", tmp.path(), "amd64").problem, Catch::Contains("lacks the F flag"));
  entry(tmp.path(), "enabled\ninterpreter /usr/bin/qemu-F-aarch64\nflags: \n");
  CHECK_FALSE(emulation_for("arm64", tmp.path(), "amd64").available);
}

TEST_CASE("emulation: without the machine's entry the sandbox registers the static interpreter in its own binfmt_misc", "[emulation]") {
  TempDir tmp;
  test::write(tmp.path() / "usr/bin/qemu-aarch64-static", "qemu");
  Emulation own = emulation_for("arm64", tmp.path(), "amd64", 1);
  CHECK(own.available);
  CHECK(own.problem.empty());
  CHECK(own.interpreter == "/usr/bin/qemu-aarch64-static");
  // ELF, 64-bit, little-endian, an executable or shared object (mask 0xfe) of machine 183, opened now (F).
  CHECK(own.sandbox_register ==
        R"(:qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:)"
        R"(\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F)");

  // A kernel that gives a user namespace no binfmt_misc (before 6.7): not available, saying why.
  Emulation old = emulation_for("arm64", tmp.path(), "amd64", 0);
  CHECK_FALSE(old.available);
  CHECK(old.sandbox_register.empty());
  CHECK_THAT(old.problem, Catch::Contains("the sandbox cannot register /usr/bin/qemu-aarch64-static itself") &&
                              Catch::Contains("no binfmt_misc of its own"));

  // The machine's own entry comes first: nothing for the sandbox to register.
  entry(tmp.path(), kDebian);
  Emulation machine = emulation_for("arm64", tmp.path(), "amd64", 1);
  CHECK(machine.available);
  CHECK(machine.sandbox_register.empty());
  CHECK(machine.interpreter == "/usr/libexec/qemu-binfmt/aarch64-binfmt-P");

  // An interpreter path binfmt_misc cannot take (':' separates its fields), an unknown machine.
  CHECK(binfmt_register_line("aarch64", "/opt/a:b/qemu").empty());
  CHECK(binfmt_register_line("riscv64", "/usr/bin/qemu-riscv64-static").empty());
  CHECK_THAT(binfmt_register_line("x86_64", "/usr/bin/qemu-x86_64-static"), Catch::Contains(R"(\x3e\x00:)"));
}
