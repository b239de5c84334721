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

  Emulation none = emulation_for("arm64", tmp.path(), "amd64");
  CHECK_FALSE(none.native);
  CHECK_FALSE(none.available);
  CHECK(none.problem == "binfmt_misc has no /proc/sys/fs/binfmt_misc/qemu-aarch64");
  std::string msg = emulation_missing(none, "arm64");
  CHECK_THAT(msg, Catch::Contains("linux/arm64 code needs QEMU user emulation") &&
                      Catch::Contains("qemu-user-static and binfmt-support"));

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
