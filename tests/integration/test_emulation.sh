#!/usr/bin/env bash
# Code of another platform under QEMU user emulation with nothing set up on the host
# (issue 36): on Linux 6.7 and later each sandbox of a linux/arm64 image registers
# Debian's qemu-aarch64-static in a binfmt_misc of its own user namespace. A fixture
# arm64 image (a hand-made aarch64 program, the host's static busybox as its shell)
# runs its build steps, its tests and `stackbuild run` emulated; hostile steps cannot
# register, disable or clear an emulator (the sandbox's binfmt_misc is read-only);
# the host's binfmt_misc is unchanged; the image is the same from an empty store; no
# interpreter, or no user namespace, is a clear error with nothing written; without
# root (user 65534) the same build gives the same image and `run` works.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
require_tool busybox unshare
QEMU=/usr/bin/qemu-aarch64-static
[[ -x $QEMU ]] || skip "no $QEMU (Debian's qemu-user-static)"
host_entry=no
grep -qs '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 && host_entry=yes
if [[ $host_entry == no ]] &&
  ! unshare --user --map-root-user --mount sh -c 'mount -t binfmt_misc none /proc/sys/fs/binfmt_misc' 2>/dev/null; then
  skip "this kernel gives a user namespace no binfmt_misc of its own (Linux 6.7 and later do), and the machine has no qemu-aarch64 entry"
fi
host_state() { { grep binfmt_misc /proc/self/mountinfo || true; ls -l /proc/sys/fs/binfmt_misc 2>/dev/null || true; } | sed 's/^[0-9]* [0-9]* //'; }
before=$(host_state)

R="$TMP/r"
mkdir -p "$R"
python3 "$HERE/aarch64_elf.py" "$R/hello" "hello from aarch64"
cp "$(command -v busybox)" "$R/sh"
file_of() { python3 -c 'import sys; h=open(sys.argv[1],"rb").read(20); print("aarch64" if h[18:20]==b"\xb7\x00" else "other")' "$1"; }
[[ $(file_of "$R/hello") == aarch64 ]] || fail "the fixture is no aarch64 program"
cat >"$R/emu.yaml" <<'YAML'
stack: emu
source_date_epoch: 1700000000
matrix:
  platform: [linux/arm64]
layers:
  - {name: base, copy: [{src: sh, dst: /bin/sh}, {src: hello, dst: /usr/bin/hello}]}
  - name: step
    build:
      run:
        - /usr/bin/hello > /hello.out
        - |
          bad=0
          if echo ':evil:E::sbx::/bin/sh:' > /proc/sys/fs/binfmt_misc/register; then echo "REGISTERED another interpreter"; bad=1; fi
          if echo 0 > /proc/sys/fs/binfmt_misc/qemu-aarch64; then echo "DISABLED qemu-aarch64"; bad=1; fi
          if echo -1 > /proc/sys/fs/binfmt_misc/status; then echo "CLEARED binfmt_misc"; bad=1; fi
          exit $bad
tags: ["emu:1"]
tests:
  - {name: hello, run: /usr/bin/hello, expect: hello from aarch64}
  - {name: built, run: "read l < /hello.out; echo got $l", expect: got hello from aarch64}
YAML

check "build steps of linux/arm64 run emulated; hostile steps cannot change the emulator"
expect_ok b1 sb build "$R/emu.yaml" -o "$TMP/out" --store "$STORE"
grep -q "layer step: steps of linux/arm64 run emulated (qemu-aarch64" "$TMP/b1.err" || { show_output b1; fail "the build did not say it emulates"; }
if [[ $host_entry == no ]]; then
  grep -q "registered in the sandbox's own binfmt_misc, $QEMU" "$TMP/b1.err" || { show_output b1; fail "not the sandbox's own entry"; }
fi
grep -q "linux/arm64 on this linux/amd64 machine: layers step ran linux/arm64 code under QEMU; the other built layers ran none" "$TMP/b1.err" ||
  { show_output b1; fail "the build log does not say which layers ran emulated"; }
[[ "$(host_state)" == "$before" ]] || fail "the host's binfmt_misc changed: before [$before] after [$(host_state)]"

check "stackbuild test runs the arm64 image's tests emulated, and says so"
expect_ok t1 sb test "$TMP/out:1" --store "$STORE"
grep -q "^passed *recipe: hello.*(emulated: qemu-aarch64)" "$TMP/t1.out" || { show_output t1; fail "hello did not pass emulated"; }
grep -q "^passed *recipe: built.*(emulated: qemu-aarch64)" "$TMP/t1.out" || { show_output t1; fail "the build step's output is not in the image"; }

check "stackbuild run of the arm64 image runs emulated; --gpus is refused for it"
expect_ok r1 sb run "$TMP/out:1" --store "$STORE" -- /usr/bin/hello
grep -qx "hello from aarch64" "$TMP/r1.out" || { show_output r1; fail "run printed no greeting"; }
grep -q "runs emulated (qemu-aarch64)" "$TMP/r1.err" || { show_output r1; fail "run did not say it emulates"; }
expect_rc 2 r2 sb run "$TMP/out:1" --store "$STORE" --gpus all -- /usr/bin/hello
grep -q "cannot use this linux/amd64 machine's GPU" "$TMP/r2.err" || { show_output r2; fail "--gpus not refused"; }
[[ "$(host_state)" == "$before" ]] || fail "the host's binfmt_misc changed after test and run"

check "the same image from an empty store (steps run emulated twice)"
expect_ok b2 sb build "$R/emu.yaml" -o "$TMP/out2" --store "$TMP/store2"
[[ "$(manifest_digest "$TMP/out" 1)" == "$(manifest_digest "$TMP/out2" 1)" ]] || fail "two builds differ"

if [[ $host_entry == no ]]; then
  check "no interpreter: the build says what to install and writes nothing"
  mkdir -p "$TMP/none"
  expect_rc 1 n1 env STACKBUILD_QEMU_DIR="$TMP/none" "$SB" build "$R/emu.yaml" -o "$TMP/out3" --store "$TMP/store3" --progress plain
  grep -q "layer 'step': linux/arm64 code needs QEMU user emulation on this linux/amd64 machine, and binfmt_misc has no /proc/sys/fs/binfmt_misc/qemu-aarch64, and there is no $TMP/none/qemu-aarch64-static for the sandbox to register; install Debian's qemu-user-static" "$TMP/n1.err" ||
    { show_output n1; fail "no clear error"; }
  [[ ! -e "$TMP/out3/index.json" ]] || fail "a refused build wrote an image"
  expect_ok n2 env STACKBUILD_QEMU_DIR="$TMP/none" "$SB" test "$TMP/out:1" --store "$STORE" --progress plain
  grep -q "^skipped *recipe: hello.*linux/arm64 code needs QEMU user emulation" "$TMP/n2.out" || { show_output n2; fail "the tests were not skipped"; }

  if [[ $(id -u) == 0 ]]; then
    check "without a user namespace the sandbox never registers (it would be the host's binfmt_misc)"
    expect_rc 1 n3 env STACKBUILD_SANDBOX_USERNS=off "$SB" build "$R/emu.yaml" -o "$TMP/out4" --store "$TMP/store4" --progress plain
    grep -q "the sandbox cannot register $QEMU itself (the sandbox has no user namespace" "$TMP/n3.err" || { show_output n3; fail "no clear error"; }
    [[ ! -e "$TMP/out4/index.json" ]] || fail "a refused build wrote an image"
  fi
fi
check "without root (user 65534): the sandbox registers QEMU in its own binfmt_misc too"
if [[ $(id -u) != 0 ]] || ! command -v setpriv >/dev/null ||
  ! setpriv --reuid=65534 --regid=65534 --clear-groups unshare --user --map-root-user true 2>/dev/null; then
  say "skipped: not root, no setpriv, or the kernel refuses unprivileged user namespaces"
else
  chmod 0755 "$TMP"
  mkdir -p "$TMP/rl" && cp -a "$R/." "$TMP/rl/" && chown -R 65534:65534 "$TMP/rl"
  as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$TMP/rl" "$@"; }
  expect_ok rl_build as_nobody "$SB" build "$TMP/rl/emu.yaml" -o "$TMP/rl/out" --store "$TMP/rl/store" --progress plain
  grep -q "registered in the sandbox's own binfmt_misc" "$TMP/rl_build.err" || [[ $host_entry == yes ]] ||
    { show_output rl_build; fail "rootless: not the sandbox's own entry"; }
  [[ "$(manifest_digest "$TMP/rl/out" 1)" == "$(manifest_digest "$TMP/out" 1)" ]] || fail "rootless: another image"
  expect_ok rl_run as_nobody "$SB" run "$TMP/rl/out:1" --store "$TMP/rl/store" --progress plain -- /usr/bin/hello
  grep -qx "hello from aarch64" "$TMP/rl_run.out" || { show_output rl_run; fail "rootless: run printed no greeting"; }
fi
[[ "$(host_state)" == "$before" ]] || fail "the host's binfmt_misc changed"
pass
