#!/usr/bin/env bash
# shellcheck disable=SC2016  # the commands in single quotes expand in the image
# `stackbuild run` (runs as root; skipped otherwise): a command inside an image of a
# layout, in the build sandbox, with the image config's environment and working
# directory; --env and --workdir override them; the command's exit status comes
# back; its writes are thrown away (a second run and the store's unpacked root do
# not see them); --timeout kills it; usage errors come before the image is unpacked;
# --gpus on a host without a GPU is a clear error; --gpus with a CDI spec of a fake
# host (--host-root): its mounts land where a merged-/usr image's links take them,
# its hooks' links are made and its folders reach the image's ldconfig (the host's
# in an image without one); the image's NVIDIA_REQUIRE_CUDA is checked against
# the CUDA version, brand and arch the fake driver's libcuda and NVML report.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
cd "$TMP"

make_busybox_root base
mkdir -p base/srv/app
echo "from the image" >base/srv/app/data.txt
cat >r.yaml <<'YAML'
stack: runtest
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
config:
  env: {PATH: /bin, GREETING: hello}
  workdir: /srv/app
tags: ["runtest:1"]
YAML
expect_ok build sb build r.yaml -o layout --store "$STORE"

check "the image's environment and working directory; --env and --workdir override them"
out=$(sb run layout:1 --store "$STORE" -- sh -c 'echo "$GREETING $(pwd) $(cat data.txt)"') ||
  fail "run failed: $out"
[[ $out == "hello /srv/app from the image" ]] || fail "got: $out"
out=$(sb run layout:1 --store "$STORE" --env GREETING=bye --env EXTRA=x=y --workdir /etc -- \
  sh -c 'echo "$GREETING $EXTRA $(pwd)"') || fail "run with --env failed: $out"
[[ $out == "bye x=y /etc" ]] || fail "got: $out"

check "the command's exit status comes back"
rc=0; sb run layout:1 --store "$STORE" -- sh -c 'exit 7' || rc=$?
[[ $rc == 7 ]] || fail "exit $rc, not 7"

check "a command's writes are thrown away"
sb run layout:1 --store "$STORE" -- sh -c 'echo written-by-run-7f3a >/srv/app/data.txt; touch /new-file' ||
  fail "the writing run failed"
out=$(sb run layout:1 --store "$STORE" -- sh -c 'cat /srv/app/data.txt; ls /new-file 2>&1 || true') ||
  fail "run failed: $out"
[[ $out == "from the image"* && $out != *"/new-file"$'\n'* && $out == *"No such file"* ]] ||
  fail "a write survived: $out"
! grep -rqs written-by-run-7f3a "$STORE" || fail "the write reached the store"

check "--timeout kills the command"
t0=$(date +%s)
rc=0; sb run layout:1 --store "$STORE" --timeout 2 -- sh -c 'sleep 61234' >run-timeout.out 2>&1 || rc=$?
(( rc != 0 && $(date +%s) - t0 < 30 )) || fail "exit $rc after $(($(date +%s) - t0)) s: $(cat run-timeout.out)"
# The kernel tears the namespace down after the kill; give it a moment (as test_sandbox does).
for _ in $(seq 25); do pgrep -f "sleep 61234" >/dev/null || break; sleep 0.2; done
no_process_matching "sleep 61234"

check "usage errors (exit 2) before anything is unpacked"
rm -rf "$TMP/s2"
for bad in "--workdir rel" "--env NOEQUALS" "--gpus 0,,1"; do
  rc=0
  # shellcheck disable=SC2086  # $bad is two words on purpose
  out=$(sb run layout:1 --store "$TMP/s2" $bad -- true 2>&1) || rc=$?
  [[ $rc == 2 ]] || fail "$bad: exit $rc, not 2: $out"
  grep -q "^stackbuild: error: ${bad%% *} wants" <<<"$out" || fail "$bad: the error: $out"
done
[[ ! -e $TMP/s2/roots && -z $(find "$TMP/s2" -name 'root-*' 2>/dev/null) ]] || fail "an image was unpacked"

check "--gpus with a CDI spec: mounts through /lib -> usr/lib, hook links, ldconfig folders"
# A fake host: the driver's libraries (with their sonames) and firmware, and
# nvidia-ctk's kind of spec, its one device node (a file here) at a hostPath
# of its own, as a driver container's are.
mkdir -p host/opt/drv host/etc/cdi
for l in cuda nvidia-ml; do
  echo "int sb_$RANDOM;" >"lib$l.c"
  cc -shared -fPIC -Wl,-soname,"lib$l.so.1" -o "host/opt/drv/lib$l.so.550.54.15" "lib$l.c"
done
echo firmware-7c1 >host/opt/drv/gsp.bin
mkdir -p host/run/drv/dev && echo node-3e5 >host/run/drv/dev/nvidia0  # a node elsewhere (hostPath)
cat >host/etc/cdi/nvidia.yaml <<'YAML'
cdiVersion: 0.6.0
kind: nvidia.com/gpu
devices: [{name: "0", containerEdits: {deviceNodes: [{path: /dev/nvidia0, hostPath: /run/drv/dev/nvidia0}]}}]
containerEdits:
  mounts:
    - {hostPath: /opt/drv/libcuda.so.550.54.15, containerPath: /usr/lib64/libcuda.so.550.54.15}
    - {hostPath: /opt/drv/libnvidia-ml.so.550.54.15, containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15}
    - {hostPath: /opt/drv/gsp.bin, containerPath: /lib/firmware/nvidia/550.54.15/gsp.bin}
  hooks:
    - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, create-symlinks, --link, 'libcuda.so.1::/usr/lib64/libcuda.so', --link, '../card1::/dev/dri/by-path/pci-0000:3b:00.0-card']}
    - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib64]}
YAML
# A merged-/usr Debian image with glibc's ldconfig.
make_busybox_root merged
mkdir -p merged/usr/lib/x86_64-linux-gnu
ln -s usr/lib merged/lib
cp /sbin/ldconfig merged/sbin/ldconfig
echo 12.8 >merged/etc/debian_version
cat >g.yaml <<'YAML'
stack: gputest
layers:
  - {name: base, copy: [{src: merged/, dst: /}]}
config:
  env: {PATH: /bin:/sbin}
tags: ["gputest:1"]
YAML
expect_ok build-merged sb build g.yaml -o glayout --store "$STORE"
out=$(sb run glayout:1 --store "$STORE" --host-root "$TMP/host" --gpus all -- sh -c \
  'ldconfig -p | grep -E "lib(cuda|nvidia-ml)"; echo "link $(readlink /usr/lib64/libcuda.so)";
   echo "dev $(readlink /dev/dri/by-path/pci-0000:3b:00.0-card) $(cat /dev/nvidia0)";
   echo "lib $(readlink /lib)"; cat /usr/lib/firmware/nvidia/550.54.15/gsp.bin' 2>&1) ||
  fail "run --gpus with the fake host's CDI spec failed: $out"
for want in "libcuda.so.1 (libc6,x86-64) => /usr/lib64/libcuda.so.1" \
    "x86_64-linux-gnu/libnvidia-ml.so.1" \
    "link libcuda.so.1" "dev ../card1 node-3e5" "lib usr/lib" "firmware-7c1"; do
  grep -qF "$want" <<<"$out" || fail "no '$want' in: $out"
done
# An image without ldconfig (the first one, busybox only): the host's, as the toolkit runs it.
out=$(sb run layout:1 --store "$STORE" --host-root "$TMP/host" --gpus all -- sh -c \
  'readlink /usr/lib64/libcuda.so.1; grep -c libnvidia-ml.so.1 /etc/ld.so.cache' 2>&1) ||
  fail "run --gpus in an image without ldconfig failed: $out"
[[ $out == "libcuda.so.550.54.15"$'\n'1 ]] || fail "no linker cache for the driver's libraries: $out"
out=$(sb run glayout:1 --store "$STORE" -- sh -c 'ls /usr/lib64 2>&1; readlink /lib') || fail "a plain run failed: $out"
[[ $out == *"No such file"*"usr/lib" ]] || fail "the injection outlived its run: $out"

check "--gpus by discovery: the multiarch directory of a Debian image, /usr/lib64 of another"
# A fake host without a CDI spec: the kernel's files, the driver's library,
# firmware, nvidia-smi. No device nodes: those would be bound from this host's
# /dev (their absence is warned about).
mkdir -p dhost/proc/driver/nvidia/gpus/0000:3b:00.0 dhost/usr/lib/x86_64-linux-gnu \
  dhost/lib/firmware/nvidia/550.54.15 dhost/usr/bin
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024" \
  >dhost/proc/driver/nvidia/version
printf 'Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-aaaa\nDevice Minor: \t 0\n' \
  >dhost/proc/driver/nvidia/gpus/0000:3b:00.0/information
cp host/opt/drv/libcuda.so.550.54.15 dhost/usr/lib/x86_64-linux-gnu/
echo firmware-d2 >dhost/lib/firmware/nvidia/550.54.15/gsp.bin
printf '#!/bin/sh\necho "GPU 0: fake"\n' >dhost/usr/bin/nvidia-smi
chmod +x dhost/usr/bin/nvidia-smi
out=$(sb run glayout:1 --store "$STORE" --host-root "$TMP/dhost" --gpus all -- sh -c \
  'readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; /usr/bin/nvidia-smi; cat /lib/firmware/nvidia/550.54.15/gsp.bin' \
  2>warnings.log) || fail "run --gpus by discovery in a Debian image failed: $out $(cat warnings.log)"
[[ $out == "libcuda.so.550.54.15"$'\n'"GPU 0: fake"$'\n'"firmware-d2" ]] || fail "a Debian image: $out"
grep -q "/dev/nvidiactl is missing: CUDA will not start" warnings.log || fail "no warning: $(cat warnings.log)"
out=$(sb run layout:1 --store "$STORE" --host-root "$TMP/dhost" --gpus all -- sh -c \
  'readlink /usr/lib64/libcuda.so.1; ls /usr/lib/x86_64-linux-gnu 2>&1; true' 2>warnings.log) ||
  fail "run --gpus by discovery in another image failed: $out $(cat warnings.log)"
[[ $out == "libcuda.so.550.54.15"$'\n'*"No such file"* ]] || fail "an image not Debian's: $out"

check "--gpus: Ubuntu's ldconfig script, an image without /etc; a script whose interpreter is missing"
# Ubuntu's /sbin/ldconfig is a script around ldconfig.real; here its shell is
# not in the image, so only ldconfig.real can make the cache (as the toolkit
# runs it there). Found on the H200: stackbuild ran the script and stopped.
make_busybox_root ubuntu
mkdir -p ubuntu/usr/lib/x86_64-linux-gnu ubuntu/srv
ln -s usr/lib ubuntu/lib
cp /sbin/ldconfig ubuntu/sbin/ldconfig.real
printf '#!/bin/bash\nexec /sbin/ldconfig.real "$@"\n' >ubuntu/sbin/ldconfig
printf '#!/bin/bash\necho never\n' >ubuntu/srv/tool.sh
chmod +x ubuntu/sbin/ldconfig ubuntu/srv/tool.sh
echo trixie/sid >ubuntu/etc/debian_version
# An image without /etc or ldconfig: the host's ldconfig writes the cache, in
# an /etc made for it in the run's writable layer.
make_busybox_root noetc
rm -rf noetc/etc
cat >u.yaml <<'YAML'
stack: ubuntu
layers:
  - {name: base, copy: [{src: ubuntu/, dst: /}]}
config:
  env: {PATH: /bin:/sbin}
tags: ["ubuntu:1"]
YAML
sed 's/ubuntu/noetc/g' u.yaml >e.yaml
expect_ok build-ubuntu sb build u.yaml -o ulayout --store "$STORE"
expect_ok build-noetc sb build e.yaml -o elayout --store "$STORE"
out=$(sb run ulayout:1 --store "$STORE" --host-root "$TMP/dhost" --gpus all -- sh -c \
  'readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; ldconfig.real -p | grep -c "libcuda.so.1 "' 2>warnings.log) ||
  fail "run --gpus in an image with Ubuntu's ldconfig script failed: $out $(cat warnings.log)"
[[ $out == "libcuda.so.550.54.15"$'\n'1 ]] || fail "no linker cache made by ldconfig.real: $out"
out=$(sb run elayout:1 --store "$STORE" --host-root "$TMP/dhost" --gpus all -- sh -c \
  'readlink /usr/lib64/libcuda.so.1; grep -c libcuda.so.1 /etc/ld.so.cache' 2>warnings.log) ||
  fail "run --gpus in an image without /etc failed: $out $(cat warnings.log)"
[[ $out == "libcuda.so.550.54.15"$'\n'1 ]] || fail "no linker cache in an image without /etc: $out"
rc=0; out=$(sb run ulayout:1 --store "$STORE" -- /srv/tool.sh 2>&1) || rc=$?
[[ $rc != 0 && $out == *"cannot run '/srv/tool.sh' in the image: /srv/tool.sh is a script for /bin/bash, which the image lacks"* ]] ||
  fail "exit $rc: $out"

check "stackbuild test on a (fake) GPU host: the recipe's GPU tests run with the driver injected, or are skipped"
cat >t.yaml <<'YAML'
stack: gpurecipe
layers:
  - {name: base, copy: [{src: merged/, dst: /}]}
config:
  env: {PATH: /bin:/sbin:/usr/bin}
tests:
  - {name: driver, gpu: true, run: nvidia-smi, expect: "GPU 0: fake"}
  - {name: libcuda, gpu: true, run: "readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1", expect: libcuda.so.550.54.15}
  - {name: cpu, run: "echo no gpu needed"}
tags: ["gpurecipe:1"]
YAML
expect_ok build-gpurecipe sb build t.yaml -o tlayout --store "$STORE"
out=$(sb test tlayout:1 --store "$STORE" --host-root "$TMP/dhost" --report treport.json 2>&1) ||
  fail "stackbuild test on the fake GPU host: $out"
python3 - treport.json <<'PY' || fail "the report: $(cat treport.json)"
import json, sys
r = {t["name"]: t["outcome"] for t in json.load(open(sys.argv[1]))["results"]}
for name in ("gpu: driver and devices", "recipe: driver", "recipe: libcuda", "recipe: cpu"):
    assert r.get(name) == "passed", (name, r)
PY
out=$(sb test tlayout:1 --store "$STORE" --host-root "$TMP/dhost" --gpus none --report treport.json 2>&1) ||
  fail "stackbuild test --gpus none: $out"
python3 - treport.json <<'PY' || fail "the report with --gpus none: $(cat treport.json)"
import json, sys
r = {t["name"]: t["outcome"] for t in json.load(open(sys.argv[1]))["results"]}
assert r["recipe: driver"] == r["recipe: libcuda"] == "skipped" and r["recipe: cpu"] == "passed", r
PY

check "gpu --cdi: the libraries' soname links, as mounts without the toolkit's hook program, as its hooks with one"
# What a runtime given the spec needs beyond the mounts: libcuda.so.1 (the
# soname CUDA opens) and libcuda.so. Read back by stackbuild, both forms give
# the image those names.
lib=/usr/lib/x86_64-linux-gnu
sb gpu --cdi --host-root "$TMP/dhost" >plain.json || fail "gpu --cdi: $(cat plain.json)"
python3 - "$lib" plain.json <<'PY' || fail "the spec without hooks: $(cat plain.json)"
import json, sys
lib, spec = sys.argv[1], json.load(open(sys.argv[2]))
edits = spec["containerEdits"]
mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
for name in ("libcuda.so.550.54.15", "libcuda.so.1", "libcuda.so"):
    assert mounts.get(f"{lib}/{name}") == f"{lib}/libcuda.so.550.54.15", (name, mounts)
assert "hooks" not in edits, edits
PY
cp -r dhost chost && mkdir -p chost/etc/cdi && cp plain.json chost/etc/cdi/nvidia.json
out=$(sb run layout:1 --store "$STORE" --host-root "$TMP/chost" --gpus all -- sh -c \
  "cat $lib/libcuda.so.1 $lib/libcuda.so >/dev/null && echo both" 2>warnings.log) ||
  fail "run with the written spec: $out $(cat warnings.log)"
[[ $out == *both ]] || fail "the soname mounts: $out"
# With nvidia-cdi-hook on the host: nvidia-ctk's hooks instead.
mkdir -p dhost/usr/bin && printf '#!/bin/sh\nexit 0\n' >dhost/usr/bin/nvidia-cdi-hook && chmod +x dhost/usr/bin/nvidia-cdi-hook
sb gpu --cdi --host-root "$TMP/dhost" >hooked.json || fail "gpu --cdi with a hook program: $(cat hooked.json)"
python3 - "$lib" hooked.json <<'PY' || fail "the spec with hooks: $(cat hooked.json)"
import json, sys
lib, spec = sys.argv[1], json.load(open(sys.argv[2]))
edits = spec["containerEdits"]
assert [m["containerPath"] for m in edits["mounts"] if "libcuda" in m["containerPath"]] == [f"{lib}/libcuda.so.550.54.15"], edits["mounts"]
assert [h["args"] for h in edits["hooks"]] == [
    ["nvidia-cdi-hook", "create-symlinks", "--link", f"libcuda.so.550.54.15::{lib}/libcuda.so.1",
     "--link", f"libcuda.so.1::{lib}/libcuda.so"],
    ["nvidia-cdi-hook", "update-ldcache", "--folder", lib]], edits["hooks"]
assert all(h["path"] == "/usr/bin/nvidia-cdi-hook" and h["hookName"] == "createContainer" for h in edits["hooks"])
PY
cp hooked.json chost/etc/cdi/nvidia.json
out=$(sb run glayout:1 --store "$STORE" --host-root "$TMP/chost" --gpus all -- sh -c \
  "readlink $lib/libcuda.so.1; readlink $lib/libcuda.so; ldconfig -p | grep -c 'libcuda.so.1 '" 2>warnings.log) ||
  fail "run with the written spec's hooks: $out $(cat warnings.log)"
[[ $out == "libcuda.so.550.54.15"$'\n'"libcuda.so.1"$'\n'1 ]] || fail "the hooks' links: $out"
rm dhost/usr/bin/nvidia-cdi-hook

check "--gpus: the image's NVIDIA_REQUIRE_CUDA against what libcuda and NVML say of the host"
# A host on driver 535 whose libcuda and NVML answer as their environment
# variables say (stackbuild asks them in a child, which inherits them), and
# an image of a CUDA release that needs 570 but lists the 535 branch of
# tesla GPUs, as NVIDIA's CUDA 12.8 images do.
fake_driver_host rhost 535.104.05
out=$(FAKE_BRAND=2 sb gpu --host-root "$TMP/rhost") || fail "gpu: $out"
grep -qxF "driver: 535.104.05 (CUDA 12.2)" <<<"$out" && grep -qF "brand tesla, arch 9.0)" <<<"$out" ||
  fail "gpu does not show what libcuda and NVML said: $out"
cat >n.yaml <<'YAML'
stack: needs570
layers:
  - {name: base, copy: [{src: merged/, dst: /}]}
config:
  env:
    PATH: /bin:/sbin
    NVIDIA_REQUIRE_CUDA: "cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=tesla,driver>=550,driver<551"
  labels: {dev.stackbuild.driver_min: 570.124.06}
tags: ["needs570:1"]
YAML
expect_ok build-needs570 sb build n.yaml -o nlayout --store "$STORE"
# A tesla GPU: accepted through its branch, with a warning that says how it runs.
out=$(FAKE_BRAND=2 sb run nlayout:1 --store "$STORE" --host-root "$TMP/rhost" --gpus all -- echo ran 2>warnings.log) ||
  fail "a listed branch was refused: $out $(cat warnings.log)"
[[ $out == ran ]] || fail "the command's output: $out"
grep -qF "driver 535.104.05 is older than the 570.124.06 the image needs (dev.stackbuild.driver_min); its NVIDIA_REQUIRE_CUDA (cuda>=12.8 or 2 other terms) accepts this host, so the tests run under CUDA minor version compatibility" warnings.log ||
  fail "no warning of minor version compatibility: $(cat warnings.log)"
# A GeForce one: refused before anything runs, saying why.
rc=0; out=$(FAKE_BRAND=5 sb run nlayout:1 --store "$STORE" --host-root "$TMP/rhost" --gpus all -- echo ran 2>&1) || rc=$?
[[ $rc == 1 ]] && ! grep -qx ran <<<"$out" || fail "a GeForce GPU on 535 was not refused (rc $rc): $out"
grep -qF "the image needs NVIDIA driver 570.124.06 or newer; this host runs 535.104.05, and its NVIDIA_REQUIRE_CUDA (cuda>=12.8 or 2 other terms) does not accept GPU 0 (CUDA 12.2, driver 535.104.05, brand geforce, arch 9.0)" <<<"$out" ||
  fail "the refusal: $out"
# NVIDIA_DISABLE_REQUIRE, from --env as from docker run -e, lets it through with a warning.
out=$(FAKE_BRAND=5 sb run nlayout:1 --store "$STORE" --host-root "$TMP/rhost" --gpus all \
  --env NVIDIA_DISABLE_REQUIRE=1 -- echo ran 2>warnings.log) || fail "NVIDIA_DISABLE_REQUIRE=1: $out $(cat warnings.log)"
grep -qF "NVIDIA_DISABLE_REQUIRE switches the toolkit's check off" warnings.log || fail "no warning: $(cat warnings.log)"
# stackbuild test decides the same, from the image's labels: a CUDA 13 image
# that lists branch 535 needs forward-compatibility libraries on a CUDA 12 driver.
sed -e 's/needs570/needs580/g' -e 's/cuda>=12.8 /cuda>=13.0 /' -e 's/570.124.06}/580.65.06, dev.stackbuild.version.cuda: 13.0.0}/' \
  n.yaml >n13.yaml
expect_ok build-needs580 sb build n13.yaml -o n13layout --store "$STORE"
rc=0; out=$(FAKE_BRAND=2 sb test n13layout:1 --store "$STORE" --host-root "$TMP/rhost" 2>&1) || rc=$?
[[ $rc == 1 ]] || fail "a CUDA 13 image on a CUDA 12 driver passed (rc $rc): $out"
grep -qF "the image's CUDA 13.0.0 does not run on a CUDA 12.2 driver without forward-compatibility libraries of a newer branch (/usr/local/cuda/compat), which it lacks" <<<"$out" ||
  fail "the refusal of stackbuild test: $out"

if [[ ! -e /dev/nvidiactl ]]; then
  check "--gpus on a host without a GPU says so"
  rc=0; out=$(sb run layout:1 --store "$STORE" --gpus all -- true 2>&1) || rc=$?
  [[ $rc != 0 ]] || fail "--gpus all ran without a GPU"
  grep -q "this host has no NVIDIA GPU" <<<"$out" || fail "the error: $out"
fi
pass
