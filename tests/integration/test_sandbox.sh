#!/usr/bin/env bash
# The build sandbox, seen from inside and outside (runs as root; skipped otherwise).
# A recipe of a static-busybox base (a copy layer) and build-step layers records what
# its steps see, and the test checks, on the unpacked image:
#   - host files outside the sandbox's mounts are invisible (/etc/debian_version, the
#     repository), /proc shows only the sandbox's processes, the step is PID 2 under
#     an init, the hostname is the sandbox's, /dev is the minimal set;
#   - without network: only `lo`, and a TCP server the test runs on the host's
#     127.0.0.1 cannot be reached; with `network: true` it can, and resolv.conf is there;
#   - a step's write to a file of a lower layer lands in its own layer only: the
#     unpacked lower rootfs in the store and the base layer are unchanged;
#   - a SysV shared memory segment the test makes on the host (ipcmk) is not in the
#     step's /proc/sysvipc/shm; a file a step leaves in /tmp (a tmpfs) is not in the image;
#   - a `cache:` directory keeps a step's writes for the next build of the layer (after an
#     edit), in the store and not in the image;
# and, with other recipes: a step that times out leaves no process behind (not even
# one it daemonised), killing stackbuild (SIGKILL) mid-step leaves none either, and a
# failing step fails the build with its exit status, the log's last lines and the log.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool timeout
cd "$TMP"

make_busybox_root base
echo "from the base layer" >base/etc/base.conf
# Programs a step makes setuid and setgid (a copy layer keeps no such bits):
# the cached root in the store holds them without, the next steps see them
# with (docs/security.md).
printf '#!/bin/sh\n' >base/bin/suid-demo
cp base/bin/suid-demo base/bin/sgid-demo

# A TCP server on the host's loopback, for the network checks.
timeout 300 python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hello\n"); c.close()
' >port.txt &
SERVER=$!
SERVERS+=("$SERVER")  # stopped at exit (lib.sh), also when a check fails
for _ in $(seq 50); do [[ -s port.txt ]] && break; sleep 0.1; done
PORT=$(cat port.txt)
[[ -n $PORT ]] || fail "the test's TCP server did not start"

cat >probe.yaml <<EOF
stack: probe
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: setbits
    build:
      run: chmod 4755 /bin/suid-demo && chmod 2755 /bin/sgid-demo
  - name: probe
    build:
      env: {PORT: "$PORT", SECRET: "$SB_SOURCE_DIR"}
      run:
        - mkdir -p /results
        - |
          r=/results
          if test -e /etc/debian_version; then echo seen; else echo absent; fi >\$r/host_etc
          if test -e "\$SECRET"; then echo seen; else echo absent; fi >\$r/host_repo
          echo \$\$ >\$r/pid
          ls -d /proc/[0-9]* | wc -l >\$r/nproc
          hostname >\$r/hostname
          ls /dev | sort | tr '\n' ' ' >\$r/dev
          tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ' >\$r/ifaces
          if nc -w 2 127.0.0.1 \$PORT </dev/null >/dev/null 2>&1; then echo reached; else echo unreachable; fi >\$r/net_off
          id -u >\$r/uid
          tail -n +2 /proc/sysvipc/shm | wc -l >\$r/shm
          echo "\$\${PIP_INDEX_URL:-unset}" >\$r/pip_off
          echo "\$\${https_proxy:-unset}" >\$r/proxy_off
          echo scratch >/tmp/left-behind
          echo changed >/etc/base.conf
          ls -l /bin/suid-demo /bin/sgid-demo | cut -c1-10 | tr '\n' ' ' >\$r/privileged
          chmod g-s /bin/sgid-demo
        - [/bin/sh, -c, 'echo argv-form >/results/argv']
  - name: online
    build:
      network: true
      run: |
        if nc -w 2 127.0.0.1 $PORT </dev/null >/dev/null 2>&1; then echo reached; else echo unreachable; fi >/results/net_on
        if test -s /etc/resolv.conf; then echo present; else echo missing; fi >/results/resolv
        echo "\$\${PIP_INDEX_URL:-unset}" >/results/pip_on
        echo "\$\${https_proxy:-unset} \$\${NO_PROXY:-unset} \$\${PIP_PROXY:-unset}" >/results/proxy_on
  - name: own-index
    build:
      network: true
      env: {PIP_INDEX_URL: "http://127.0.0.1:9/mine/", https_proxy: "http://recipe-proxy:1"}
      run: 'echo "\$PIP_INDEX_URL \$https_proxy" >/results/pip_own'
tags: ["probe:1"]
EOF

# A SysV shared memory segment of the host's, which the steps' IPC namespace must hide.
require_tool ipcmk ipcrm
SHMID=$(ipcmk -M 1024 | grep -o '[0-9]*$')
[[ -n $SHMID ]] || fail "ipcmk made no shared memory segment"
trap 'ipcrm -m "$SHMID" 2>/dev/null || true; cleanup' EXIT
awk -v id="$SHMID" '$2 == id {found = 1} END {exit !found}' /proc/sysvipc/shm ||
  fail "the host's /proc/sysvipc/shm does not list segment $SHMID"

check "a recipe with build steps builds"
# The proxy is one nothing listens on: the steps only print it, and the
# build's own downloads are all file:// or local.
STACKBUILD_PIP_INDEX_URL=http://127.0.0.1:9/simple https_proxy=http://127.0.0.1:9/ NO_PROXY=127.0.0.1 \
  PIP_PROXY=http://127.0.0.1:9/pip \
  expect_ok build sb build probe.yaml -o out --store "$STORE"
ipcrm -m "$SHMID"
grep -q "probe | " "$TMP/build.err" || { show_output build; fail "the steps' output did not stream under the layer's name"; }
expect_ok unpack sb unpack out:1 rootfs --store "$STORE"
R=rootfs/results
want() { [[ "$(cat "$R/$1")" == "$2" ]] || fail "$1: expected '$2', got '$(cat "$R/$1")'"; }

check "host files outside the mounts are invisible"
want host_etc absent
want host_repo absent
check "own PID namespace (the step is PID 2 under the sandbox's init), hostname, uid 0"
want pid 2
[[ $(cat $R/nproc) -le 4 ]] || fail "/proc shows $(cat $R/nproc) processes: not a PID namespace of its own"
want hostname stackbuild
want uid 0
check "a minimal /dev"
want dev "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "
check "no network without 'network: true': only lo, and the host's 127.0.0.1:$PORT is unreachable"
want ifaces "lo "
want net_off unreachable
check "with 'network: true' the host's network and resolv.conf are there"
want net_on reached
want resolv present
check "a step with the network gets stackbuild's Python index as PIP_INDEX_URL, unless the recipe names one"
want pip_on http://127.0.0.1:9/simple/
want pip_off unset
want pip_own "http://127.0.0.1:9/mine/ http://recipe-proxy:1"
check "a step with the network gets the machine's proxy variables, as BuildKit's RUN does, and pip's proxy; one without, none"
want proxy_on "http://127.0.0.1:9/ 127.0.0.1 http://127.0.0.1:9/pip"
want proxy_off unset
check "argv commands run without a shell"
want argv argv-form
check "own IPC namespace: the host's shared memory segment is not there"
want shm 0
check "/tmp is the sandbox's tmpfs: what a step leaves there is not in the layer"
[[ ! -e rootfs/tmp/left-behind ]] || fail "/tmp/left-behind entered the image"

check "a step's write to a lower layer's file lands in its own layer only"
[[ "$(cat rootfs/etc/base.conf)" == changed ]] || fail "the image does not have the step's change"
check "the steps see the image's setuid and setgid bits; the store's roots hold none; a step's chmod g-s stays"
[[ "$(cat $R/privileged)" == "-rwxr-sr-x -rwsr-xr-x " ]] || fail "the step saw '$(cat $R/privileged)'"
[[ -z "$(find "$STORE/rootfs" -type f -perm /6000)" ]] ||
  fail "setuid or setgid files in the store's cached roots: $(find "$STORE/rootfs" -type f -perm /6000)"
expect_ok unpack-owners sb unpack --preserve-owner out:1 owners --store "$STORE"
[[ "$(stat -c %a owners/bin/suid-demo) $(stat -c %a owners/bin/sgid-demo)" == "4755 755" ]] ||
  fail "in the image: $(stat -c %a owners/bin/suid-demo) $(stat -c %a owners/bin/sgid-demo), not 4755 755"
rm -rf owners

# The base layer's unpacked root: the one without the probe's results.
for lower in "$STORE"/rootfs/*/tree/etc/base.conf; do [[ -e ${lower%/etc/base.conf}/results ]] || break; done
[[ -e ${lower%/etc/base.conf} && ! -e ${lower%/etc/base.conf}/results ]] || fail "no unpacked base layer in $STORE/rootfs"
[[ "$(cat "$lower")" == "from the base layer" ]] || fail "the unpacked lower layer was changed: $lower"
{ sed -e '/name: probe/,$d' probe.yaml; echo 'tags: ["probe:1"]'; } >base-only.yaml
expect_ok base-only sb build base-only.yaml -o out-base --store "$TMP/store2"
base_digests=$(image_digests out-base 1) && probe_digests=$(image_digests out 1) || fail "no image '1' in out or out-base"
[[ "$(grep layer0 <<<"$base_digests")" == "$(grep layer0 <<<"$probe_digests")" ]] ||
  fail "the base layer's digest changed when steps ran on it"

check "the second build does no work and says so"
expect_ok rebuild sb build probe.yaml -o out --store "$STORE"
grep -q "5 from the cache" "$TMP/rebuild.err" || { show_output rebuild; fail "the rebuild did work"; }
grep -q "probe | " "$TMP/rebuild.err" && fail "the rebuild ran steps"

kill "$SERVER" 2>/dev/null || true

check "a cache: directory keeps what steps wrote between builds, outside the image"
cat >cache.yaml <<'EOF'
stack: cached
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: cc
    build:
      cache: [/var/cache/demo]
      env: {MARK: one}
      run: echo "$MARK" >>/var/cache/demo/log && mkdir -p /seen && cp /var/cache/demo/log /seen/log
tags: ["cached:1"]
EOF
expect_ok cache1 sb build cache.yaml -o cout --store "$STORE"
sed -i 's/MARK: one/MARK: two/' cache.yaml  # a new key: the layer is built again
expect_ok cache2 sb build cache.yaml -o cout --store "$STORE"
grep -q "1 built" "$TMP/cache2.err" || { show_output cache2; fail "the edited layer was not rebuilt"; }
expect_ok cunpack sb unpack cout:1 crootfs --store "$STORE"
[[ "$(cat crootfs/seen/log)" == $'one\ntwo' ]] ||
  fail "the second build's step did not see the first's write to the cache: '$(cat crootfs/seen/log)'"
log="$STORE/cache/cached/cc/var_cache_demo/log"  # the stack's and layer's own
[[ "$(cat "$log")" == $'one\ntwo' ]] || fail "the cache in the store holds '$(cat "$log")'"
[[ ! -e crootfs/var/cache/demo ]] || fail "the image holds the cache directory /var/cache/demo"

check "another recipe's steps do not see that cache, unless both name a shared one"
sed -e 's/^stack: cached/stack: other/' -e 's/MARK: two/MARK: other/' -e 's/"cached:1"/"other:1"/' cache.yaml >other.yaml
expect_ok other sb build other.yaml -o oout --store "$STORE"
expect_ok ounpack sb unpack oout:1 orootfs --store "$STORE"
[[ "$(cat orootfs/seen/log)" == other ]] || fail "another stack's step saw '$(cat orootfs/seen/log)' in its cache"
for s in cached other; do
  sed -e "s/^stack: .*/stack: $s/" -e "s/MARK: .*}/MARK: shared-$s}/" -e "s/tags: .*/tags: [\"$s:2\"]/" \
    -e 's|cache: \[/var/cache/demo\]|cache: [{path: /var/cache/demo, shared: demo}]|' cache.yaml >"shared-$s.yaml"
  expect_ok "shared-$s" sb build "shared-$s.yaml" -o "sout-$s" --store "$STORE"
done
[[ "$(cat "$STORE/cache/@shared/demo/log")" == $'shared-cached\nshared-other' ]] ||
  fail "the shared cache holds '$(cat "$STORE/cache/@shared/demo/log")'"

check "a step that times out leaves no process behind, not even a daemonised one"
cat >hang.yaml <<'EOF'
stack: hang
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: hang
    build:
      timeout: 2
      run: "setsid sh -c 'sleep 987654 </dev/null >/dev/null 2>&1 &'; sleep 0.5; ps | grep -q '[s]leep 987654' && echo daemon-started; sleep 987655"
EOF
expect_rc 1 hang sb build hang.yaml -o out-hang --store "$STORE"
grep -q "timed out after 2s" "$TMP/hang.err" || { show_output hang; fail "no timeout message"; }
grep -q "hang | daemon-started" "$TMP/hang.err" || { show_output hang; fail "the step's daemon never started"; }
no_process_matching "sleep 98765"

check "killing stackbuild (SIGKILL) mid-step kills the whole sandbox (its scratch files stay: another store)"
sed -e 's/timeout: 2/timeout: 600/' -e 's/987654/987664/; s/987655/987665/' hang.yaml >killed.yaml
"$SB" build killed.yaml -o out-killed --store "$TMP/store-killed" --progress plain >killed.out 2>&1 &
SBPID=$!
for _ in $(seq 100); do
  if pgrep -f "sleep 987664" >/dev/null; then break; fi
  sleep 0.2
done
pgrep -f "sleep 987664" >/dev/null || { cat killed.out >&2; fail "the step's daemon never started"; }
kill -9 "$SBPID"
wait "$SBPID" 2>/dev/null || true
for _ in $(seq 25); do pgrep -f "sleep 98766" >/dev/null || break; sleep 0.2; done
no_process_matching "sleep 98766"

check "a failing step fails the build with its status, the log's last lines and the log"
cat >fails.yaml <<'EOF'
stack: fails
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: broken
    build:
      run: ["echo first-line", "echo some-output; echo to-stderr >&2; exit 3"]
EOF
expect_rc 1 fails sb build fails.yaml -o out-fails --store "$STORE"
for s in "step 2 of 2" "exited with status 3" "to-stderr" "some-output"; do
  grep -q -- "$s" "$TMP/fails.err" || { show_output fails; fail "the error lacks '$s'"; }
done
log=$(sed -n 's/^ *log: //p' "$TMP/fails.err" | head -1)
[[ -f $log ]] && grep -q first-line "$log" || fail "the log '$log' is missing or lacks the first step's output"
[[ -z "$(store_temps "$STORE")" ]] || fail "temporary files left in the store: $(store_temps "$STORE")"

check "without root: a user namespace maps the build to root, and deletions still become whiteouts"
if ! command -v setpriv >/dev/null ||
  ! setpriv --reuid=65534 --regid=65534 --clear-groups unshare --user --map-root-user true 2>/dev/null; then
  say "part skipped: no setpriv, or the kernel refuses unprivileged user namespaces"
else
  RL=$(mktemp -d /tmp/sb-rootless.XXXXXX)
  chmod 0755 "$RL"
  cp -a base "$RL/base"
  cat >"$RL/r.yaml" <<'EOF'
stack: rootless
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - {name: s, build: {run: "id -u >/uid && rm /bin/vi && mkdir -p /data && echo hi >/data/f"}}
tags: ["rootless:1"]
EOF
  chown -R 65534:65534 "$RL"
  (cd "$RL" && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$RL" "$SB" build r.yaml -o out --store st --progress plain) >rootless.log 2>&1 ||
    { cat rootless.log >&2; rm -rf "$RL"; fail "the rootless build failed"; }
  top=$(json "$RL/out/blobs/sha256/$(manifest_digest "$RL/out" 1)" 'j["layers"][1]["digest"][7:]')
  listing=$(python3 -c 'import sys, tarfile; print(" ".join(f"{m.name}:{m.uid}" for m in tarfile.open(sys.argv[1])))' "$RL/out/blobs/sha256/$top")
  rm -rf "$RL"
  [[ "$listing" == "bin:0 bin/.wh.vi:0 data:0 data/f:0 uid:0" ]] || fail "rootless top layer: '$listing'"
fi
pass
