#!/usr/bin/env bash
# shellcheck disable=SC2016  # the probe's lines expand in the image
# The trust boundary, probed from inside (runs as root; skipped otherwise): a
# probe runs as a build step, as `stackbuild run` and as a recipe test under
# `stackbuild test`, started by root and by an unprivileged user (65534), and
# checks from inside the sandbox that:
#   - it is not in the host's user namespace (uid_map is not the identity);
#   - NoNewPrivs is 1 and Seccomp is 2 (a filter) in its /proc/self/status;
#   - nothing of stackbuild is readable: no process's environment or command
#     line holds a variable or argument that was in stackbuild's (a sentinel in
#     both), and PID 1 holds no open file;
#   - the command (PID 2) has the three standard file descriptors and no more;
#   - a device node made with mknod cannot be opened (/dev is the place without nodev);
#   - /proc/sys cannot be written; /proc/kcore and /proc/keys show nothing;
#   - the filter refuses what Docker's default profile refuses (keyctl through
#     busybox's lack of it is not testable: unshare of a user namespace is).
# The probe prints "ok:" and "FAIL:" lines and exits 1 on any FAIL.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
cd "$TMP"
chmod 0755 "$TMP"

make_busybox_root base
cat >base/probe.sh <<'SH'
#!/bin/sh
bad=0
ok()   { echo "ok: $*"; }
nope() { echo "FAIL: $*"; bad=1; }
read -r inner outer count </proc/self/uid_map
if [ "$inner $outer $count" = "0 0 4294967295" ]; then nope "the host's user namespace (uid_map $inner $outer $count)"
else ok "uid_map $inner $outer $count"; fi
nnp=$(sed -n 's/^NoNewPrivs:[[:space:]]*//p' /proc/self/status)
[ "$nnp" = 1 ] && ok "NoNewPrivs 1" || nope "NoNewPrivs '$nnp'"
sec=$(sed -n 's/^Seccomp:[[:space:]]*//p' /proc/self/status)
[ "$sec" = 2 ] && ok "Seccomp 2" || nope "Seccomp '$sec'"
seen=0
for p in /proc/[0-9]*; do
  for f in environ cmdline; do
    if tr '\0' '\n' <"$p/$f" 2>/dev/null | grep -q 'SBPROBESECRET'; then
      nope "$p/$f holds stackbuild's secret"; seen=1
    fi
  done
done
[ $seen = 1 ] || ok "no process shows the secret"
n=$(ls /proc/1/fd 2>/dev/null | wc -l)
[ "$n" -le 3 ] && ok "PID 1 holds $n files" || nope "PID 1 holds $n files: $(ls -l /proc/1/fd 2>&1 | tr '\n' ' ')"
# The command as the init started it (PID 2: this script's shell), less the
# script busybox sh keeps open and what it opens for a moment to run ls and
# readlink (gone by the time readlink looks).
ls /proc/2/fd >/tmp/probe-fds
fds=
for n in $(cat /tmp/probe-fds); do
  t=$(readlink /proc/2/fd/$n)
  [ -z "$t" ] || [ "$t" = /probe.sh ] || fds="$fds$n "
done
[ "$fds" = "0 1 2 " ] && ok "fds $fds" || nope "the command's fds: $fds"
if mknod /dev/probe-mem c 1 3 2>/dev/null && head -c 1 /dev/probe-mem >/dev/null 2>&1; then
  nope "mknod and open of a device node worked"
else ok "no device node of our own"; fi
if (echo -n probe >/proc/sys/kernel/domainname) 2>/dev/null; then nope "/proc/sys is writable"
else ok "/proc/sys is read-only"; fi
k=$(head -c 16 /proc/kcore 2>/dev/null | wc -c)
[ "$k" = 0 ] && ok "/proc/kcore is empty" || nope "/proc/kcore gave $k bytes"
if unshare -U true 2>/dev/null; then nope "a new user namespace was allowed"; else ok "no new user namespace"; fi
exit $bad
SH
chmod 0755 base/probe.sh

cat >r.yaml <<'YAML'
stack: boundary
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: probe
    build:
      run: [[/bin/sh, /probe.sh]]
config:
  env: {PATH: /bin}
tests:
  - {name: boundary, run: "sh /probe.sh"}
tags: ["boundary:1"]
YAML
# The sentinel is in stackbuild's environment and in its command line (the
# output directory's name): the probe looks for it in every process it sees.
export SBPROBESECRET_ENV=SBPROBESECRET-in-the-environment

probe_all() {  # probe_all WHO PREFIX...: the three ways, run through PREFIX
  local who=$1
  shift
  check "$who: the probe as a build step"
  run_capture "$who-build" "$@" "$SB" build r.yaml -o "out-$who-SBPROBESECRET" --store "st-$who" --progress plain
  if [[ $RC != 0 ]]; then show_output "$who-build"; fail "$who: the build step's probe failed (exit $RC)"; fi
  grep -q 'probe | ok: Seccomp 2' "$TMP/$who-build.out" "$TMP/$who-build.err" ||
    { show_output "$who-build"; fail "$who: the probe's output is missing"; }
  check "$who: the probe under stackbuild run"
  run_capture "$who-run" "$@" "$SB" run "out-$who-SBPROBESECRET:1" --store "st-$who" --progress plain -- sh /probe.sh
  if [[ $RC != 0 ]]; then show_output "$who-run"; fail "$who: the probe failed under run (exit $RC)"; fi
  check "$who: the probe as a recipe test under stackbuild test"
  run_capture "$who-test" "$@" "$SB" test "out-$who-SBPROBESECRET:1" --store "st-$who" --progress plain
  if [[ $RC != 0 ]]; then show_output "$who-test"; fail "$who: the probe failed under test (exit $RC)"; fi
}

probe_all root env

if ! command -v setpriv >/dev/null ||
  ! setpriv --reuid=65534 --regid=65534 --clear-groups unshare --user --map-root-user true 2>/dev/null; then
  say "rootless part skipped: no setpriv, or the kernel refuses unprivileged user namespaces"
else
  mkdir -p rl && cp -a base r.yaml rl/ && chown -R 65534:65534 rl
  cd rl
  probe_all rootless setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$TMP/rl"
  cd ..
fi

check "the weaker mode is refused unless asked for: STACKBUILD_SANDBOX_USERNS must be on or off"
rc=0
out=$(STACKBUILD_SANDBOX_USERNS=maybe "$SB" run "out-root-SBPROBESECRET:1" --store st-root --progress plain -- true 2>&1) || rc=$?
[[ $rc != 0 && $out == *STACKBUILD_SANDBOX_USERNS* ]] || fail "a bad STACKBUILD_SANDBOX_USERNS: exit $rc: $out"
pass
