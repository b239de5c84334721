#!/usr/bin/env bash
# linux/arm64 on this amd64 machine (issue 36). recipes/cuda-base-wheels.yaml's arm64
# point (SB_ARM64_CUDA, default 13.2) from its lockfile: Debian 12's arm64 packages and
# NVIDIA's manylinux aarch64 wheels, assembled without running anything of arm64 (the
# build log says no layer ran emulated). The image's config is linux/arm64, its ELF
# files are aarch64 (nvcc, libcudart, python3.11, libc), the static checks pass, and its
# tests run under QEMU user emulation where the machine has it (qemu-user-static: the
# sandbox registers it in its own binfmt_misc on Linux 6.7+): `nvcc --version` and an
# nvcc compile pass emulated, GPU tests skipped. Built with the amd64 point, the shared
# tag is one index over both platforms (skopeo --override-arch and --raw, the OCI
# schemas). A second build from an empty store gives the same arm64 image. Then
# PyTorch: recipes/pytorch.yaml's own points have no CUDA wheels for aarch64 on the
# index (lock explains it); a point that has them (torch 2.11.0, CUDA 13.0) builds for
# arm64, and under emulation imports torch, reports CUDA 13.0 and imports numpy.
# Maintainer scripts: a trixie os layer with configure: true runs dpkg --configure -a
# emulated, and minitensor-wheels' build steps compile under QEMU.
# Build times are printed (arm64 against amd64; bench/bench_arm64.sh measures it).
# Label e2e: downloads ~8 GB (SB_E2E_STORE=DIR keeps them between runs; the second
# arm64 build and minitensor's always use an empty store) and needs ~30 GB of scratch space.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
[[ $(uname -m) == x86_64 ]] || skip "this test builds arm64 on an amd64 machine"
S=${SB_E2E_STORE:-$STORE}
CUDA=${SB_ARM64_CUDA:-13.2}
RECIPE=$SB_SOURCE_DIR/recipes/cuda-base-wheels.yaml
avail=$(df -Pk "$TMP" | awk 'NR==2 {print $4}')
(( avail > ${SB_E2E_NEED_GB:-30} * 1024 * 1024 )) || skip "needs ${SB_E2E_NEED_GB:-30} GB free in $TMP (SB_E2E_NEED_GB)"
emulation=no
if grep -qs '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 ||
  { [[ -x /usr/bin/qemu-aarch64-static ]] &&
    unshare --user --map-root-user --mount sh -c 'mount -t binfmt_misc none /proc/sys/fs/binfmt_misc' 2>/dev/null; }; then
  emulation=yes
fi
say "QEMU user emulation for aarch64 here: $emulation"

state=$([[ -z "$(ls -A "$S" 2>/dev/null)" ]] && echo "an empty store, downloads included" || echo "store $S as it was")
seconds_since() { python3 -c "import time; print(round(time.time() - $1, 1))"; }

check "cuda=$CUDA for linux/arm64 builds from the lockfile, with no layer run emulated"
start=$(date +%s.%N)
sb build "$RECIPE" --only cuda="$CUDA" --only platform=linux/arm64 --locked -o "$TMP/out" --store "$S" >"$TMP/arm.out" 2>&1 ||
  fail "build: $(tail -30 "$TMP/arm.out")"
arm_s=$(seconds_since "$start")
grep -A4 "summary (" "$TMP/arm.out" || true
! grep -q "emulated" "$TMP/arm.out" || fail "a layer ran emulated: $(grep emulated "$TMP/arm.out")"
grep -q "linux/arm64 on this linux/amd64 machine: no layer ran linux/arm64 code" "$TMP/arm.out" ||
  grep -q "0 built, 4 reused" "$TMP/arm.out" || fail "the build log does not say no arm64 code ran"
ref=$(json "$TMP/out/index.json" '[m["annotations"]["org.opencontainers.image.ref.name"] for m in j["manifests"] if not m["annotations"]["org.opencontainers.image.ref.name"].endswith("-matrix")][0]')
say "ref $ref, $arm_s s"
arm_digest() {  # the arm64 manifest under the tag: itself, or the index's arm64 entry
  python3 - "$1" "$ref" <<'PY'
import json, os, sys
d, ref = sys.argv[1:]
m = [m for m in json.load(open(d + "/index.json"))["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == ref][0]
if m["mediaType"].endswith("index.v1+json"):
    ix = json.load(open(os.path.join(d, "blobs", *m["digest"].split(":"))))
    m = [x for x in ix["manifests"] if x["platform"]["architecture"] == "arm64"][0]
print(m["digest"])
PY
}

check "the image is linux/arm64 and its files are aarch64"
python3 - "$TMP/out" "$(arm_digest "$TMP/out")" <<'PY' || fail "not an arm64 image"
import json, os, sys
d, digest = sys.argv[1:]
man = json.load(open(os.path.join(d, "blobs", *digest.split(":"))))
cfg = json.load(open(os.path.join(d, "blobs", *man["config"]["digest"].split(":"))))
assert (cfg["os"], cfg["architecture"]) == ("linux", "arm64"), cfg["architecture"]
PY
expect_ok unpack sb unpack "$TMP/out:$ref" "$TMP/root" --store "$S" --platform linux/arm64
elf_machine() { python3 -c 'import sys; b=open(sys.argv[1],"rb").read(20); print(int.from_bytes(b[18:20],"little"))' "$1"; }
libc=$(cd "$TMP/root" && find lib usr/lib -path '*aarch64-linux-gnu/libc.so.6' 2>/dev/null | head -1)
[[ -n $libc ]] || fail "no aarch64-linux-gnu/libc.so.6 in the image"
for f in usr/local/lib/python3.11/dist-packages/nvidia/cu13/bin/nvcc usr/bin/python3.11 "$libc"; do
  [[ "$(elf_machine "$TMP/root/$f")" == 183 ]] || fail "$f is not an aarch64 ELF file (e_machine $(elf_machine "$TMP/root/$f"))"
done
ls "$TMP"/root/usr/local/lib/python3.11/dist-packages/nvidia/cu13/lib/libcudart.so.* >/dev/null || fail "no libcudart"
grep -A3 '^Package: python3.11$' "$TMP/root/var/lib/dpkg/status" | grep -q '^Architecture: arm64$' || fail "python3.11 is not Debian's arm64 package"
rm -rf "$TMP/root"

check "stackbuild test: static checks pass on the aarch64 files; nvcc runs and compiles emulated; GPU tests skipped"
rc=0
start=$(date +%s.%N)
compile=()
[[ $emulation == yes ]] && compile=(--compile-builtins)  # the GPU test programs, built by the image's nvcc under QEMU
sb test "$TMP/out:$ref" --platform linux/arm64 "${compile[@]}" --store "$S" --report "$TMP/report.json" >"$TMP/test.out" 2>&1 || rc=$?
cat "$TMP/test.out"
say "test: $(seconds_since "$start") s"
grep -q "^passed *static: libraries resolve" "$TMP/test.out" || fail "the library check did not pass"
grep -q "^skipped *recipe: driver" "$TMP/test.out" || fail "the GPU test was not skipped"
(( rc == 0 )) || fail "test exited $rc"
if [[ $emulation == yes ]]; then
  grep -q "^passed *recipe: nvcc .*(emulated: qemu-aarch64)" "$TMP/test.out" || fail "nvcc --version did not pass emulated"
  grep -q "^passed *recipe: compile .*(emulated: qemu-aarch64)" "$TMP/test.out" || fail "the nvcc compile did not pass emulated"
  for c in cuda cublas cudnn nccl; do
    grep -q "^passed *builtin: compile $c .*image nvcc" "$TMP/test.out" || fail "the built-in $c program did not compile with the image's nvcc"
  done
else
  grep -q "^skipped *recipe: nvcc .*qemu-user-static" "$TMP/test.out" || fail "without QEMU the nvcc test is not skipped naming it"
fi

check "the amd64 point beside it: the shared tag is one index over both platforms"
start=$(date +%s.%N)
sb build "$RECIPE" --only cuda="$CUDA" --only platform=linux/amd64 --locked -o "$TMP/amd" --store "$S" >"$TMP/amd.out" 2>&1 ||
  fail "amd64: $(tail -30 "$TMP/amd.out")"
amd_s=$(seconds_since "$start")
sb build "$RECIPE" --only cuda="$CUDA" --locked -o "$TMP/both" --store "$S" >"$TMP/both.out" 2>&1 || fail "both: $(tail -30 "$TMP/both.out")"
python3 - "$TMP/both" "$ref" <<'PY' || fail "no two-platform index"
import json, os, sys
d, ref = sys.argv[1:]
m = [m for m in json.load(open(d + "/index.json"))["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == ref][0]
assert m["mediaType"] == "application/vnd.oci.image.index.v1+json", m
ix = json.load(open(os.path.join(d, "blobs", *m["digest"].split(":"))))
assert [x["platform"]["architecture"] for x in ix["manifests"]] == ["amd64", "arm64"], ix
PY
[[ "$(arm_digest "$TMP/out")" == "$(arm_digest "$TMP/both")" ]] || fail "the arm64 image differs between the two builds"
if command -v skopeo >/dev/null 2>&1; then
  [[ "$(skopeo inspect --format '{{.Architecture}}' --override-arch arm64 "oci:$TMP/both:$ref")" == arm64 ]] || fail "skopeo --override-arch arm64"
  [[ "$(skopeo inspect --format '{{.Architecture}}' --override-arch amd64 "oci:$TMP/both:$ref")" == amd64 ]] || fail "skopeo --override-arch amd64"
  skopeo inspect --raw "oci:$TMP/both:$ref" | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["mediaType"].endswith("index.v1+json") and len(j["manifests"]) == 2, j' ||
    fail "skopeo --raw: not a two-platform index"
fi
if [[ -f "$SCHEMAS/image-index-schema.json" ]] && python3 -c "import jsonschema" 2>/dev/null; then
  expect_ok validate python3 "$HERE/../integration/validate_oci.py" "$SCHEMAS" "$TMP/both"
fi
rm -rf "$TMP/amd" "$TMP/both"

check "the arm64 image again from an empty store: bit-identical"
expect_ok again sb build "$RECIPE" --only cuda="$CUDA" --only platform=linux/arm64 --locked -o "$TMP/again" --store "$TMP/store2"
[[ "$(arm_digest "$TMP/out")" == "$(arm_digest "$TMP/again")" ]] || fail "two arm64 builds from empty stores differ"
rm -rf "$TMP/store2" "$TMP/again"

if [[ $emulation == yes ]]; then
  check "examples/minitensor-wheels.yaml for arm64: its make, nvcc and g++ steps run emulated; its tests pass emulated"
  start=$(date +%s.%N)
  # An empty store: the minitensor layer is built, never taken from a cache.
  expect_ok mt sb build "$SB_SOURCE_DIR/examples/minitensor-wheels.yaml" --only cuda="$CUDA" --only platform=linux/arm64 \
    -o "$TMP/mt" --store "$TMP/store3"
  say "minitensor arm64 (its layer compiled under QEMU): $(seconds_since "$start") s"
  grep -q "layer minitensor: steps of linux/arm64 run emulated (qemu-aarch64" "$TMP/mt.err" || fail "the steps did not say they ran emulated"
  rc=0
  sb test "$TMP/mt:26.11-cuda$CUDA" --store "$TMP/store3" >"$TMP/mttest.out" 2>&1 || rc=$?
  cat "$TMP/mttest.out"
  (( rc == 0 )) || fail "test exited $rc"
  grep -q "^passed *static: CUDA code for every requested arch" "$TMP/mttest.out" || fail "the aarch64 library lacks sm_80/sm_90 code"
  grep -q "^passed *recipe: loads .*(emulated: qemu-aarch64)" "$TMP/mttest.out" || fail "minitensor_test --archs did not pass emulated"
  rm -rf "$TMP/mt" "$TMP/store3"
fi

if [[ $emulation == yes ]]; then
  check "maintainer scripts of arm64 packages: a trixie os layer with configure: true runs dpkg --configure -a emulated"
  mkdir -p "$TMP/cfg"
  cat >"$TMP/cfg/c.yaml" <<'YAML'
stack: cfg
source_date_epoch: 1700000000
matrix:
  platform: [linux/arm64]
layers:
  - {name: os, use: debian, version: trixie, packages: [ca-certificates], configure: true}
tags: ["cfg:1"]
tests:
  - {name: arch, run: "test -s /etc/ssl/certs/ca-certificates.crt && dpkg --print-architecture", expect: arm64}
YAML
  start=$(date +%s.%N)
  expect_ok cfg sb build "$TMP/cfg/c.yaml" -o "$TMP/cfg/out" --store "$TMP/store4"
  say "trixie arm64 os layer, its maintainer scripts under QEMU: $(seconds_since "$start") s"
  grep -q "layer os: steps of linux/arm64 run emulated" "$TMP/cfg.err" || fail "dpkg --configure -a did not run emulated"
  grep -q "^os | Setting up ca-certificates" "$TMP/cfg.err" || fail "ca-certificates' postinst did not run"
  expect_ok cfgunpack sb unpack "$TMP/cfg/out:1" "$TMP/cfg/root"
  ! grep "^Status:" "$TMP/cfg/root/var/lib/dpkg/status" | grep -v "install ok installed" ||
    fail "packages left unconfigured"
  expect_ok cfgtest sb test "$TMP/cfg/out:1" --store "$TMP/store4"
  grep -q "^passed *recipe: arch .*(emulated: qemu-aarch64)" "$TMP/cfgtest.out" || fail "the image's test did not pass emulated"
  rm -rf "$TMP/cfg" "$TMP/store4"
fi

check "pytorch.yaml's points for arm64: lock explains that the index's aarch64 torch has no CUDA"
mkdir -p "$TMP/pt"
cat >"$TMP/pt/own.yaml" <<YAML
extends: $SB_SOURCE_DIR/recipes/pytorch.yaml
matrix:
  include:
    - {cuda: "12.8", pytorch: "2.8.0", arch: ["9.0"], platform: linux/arm64}
YAML
expect_rc 1 ptlock sb lock "$TMP/pt/own.yaml" --store "$S"
grep -q "layer 'pytorch': the Python index's pytorch 2.8.0 (cu128) for CPython 3.11, manylinux glibc 2.36, aarch64 is a build without CUDA (torch-2.8.0-cp311-cp311-manylinux_2_28_aarch64.whl)" "$TMP/ptlock.err" ||
  { show_output ptlock; fail "not explained"; }

if [[ $emulation == yes ]]; then
  check "torch 2.11.0 with CUDA 13.0 for arm64: under emulation it imports, reports CUDA 13.0, and numpy imports"
  # The tools layer without jupyterlab: its setuptools 8x is newer than torch 2.11 allows.
  # The static checks' findings are NVIDIA's aarch64 wheels' own: libcusolverMg lacks the
  # RUNPATH its x86_64 build has; NVSHMEM's MPI, PMIx and UCX plugins need what they plug
  # into; libcufftw carries sm_75 only.
  cat >"$TMP/pt/arm.yaml" <<YAML
extends: $SB_SOURCE_DIR/recipes/pytorch.yaml
matrix:
  include:
    - {cuda: "13.0", pytorch: "2.11.0", arch: ["9.0"], platform: linux/arm64}
layers:
  - {name: tools, pip: ["numpy==2.2.6"]}
tests:
  - {name: tools, run: "python3 -c 'import numpy; print(numpy.__version__)'", expect: "2.2.6"}
static_checks:
  libraries_ignore:
    - /usr/local/lib/python3.*/dist-packages/nvidia/cu13/lib/libcusolverMg.so.*
    - /usr/local/lib/python3.*/dist-packages/nvidia/cu13/lib/libcufile_rdma.so.*
    - /usr/local/lib/python3.*/dist-packages/nvidia/nvshmem/lib/nvshmem_*.so.*
  arch_ignore: ["/usr/local/lib/python3.*/dist-packages/nvidia/cu13/lib/libcufftw.so.*"]
YAML
  expect_ok ptlock2 sb lock "$TMP/pt/arm.yaml" --store "$S"
  start=$(date +%s.%N)
  expect_ok ptbuild sb build "$TMP/pt/arm.yaml" --locked -o "$TMP/ptout" --store "$S"
  say "torch arm64 image: $(seconds_since "$start") s"
  ! grep -q "emulated" "$TMP/ptbuild.err" || fail "a layer ran emulated"
  start=$(date +%s.%N)
  rc=0
  sb test "$TMP/ptout:26.11-2.11.0-cuda13.0" --store "$S" >"$TMP/pttest.out" 2>&1 || rc=$?
  cat "$TMP/pttest.out"
  say "torch arm64 test: $(seconds_since "$start") s"
  (( rc == 0 )) || fail "test exited $rc"
  for t in import versions tools; do
    grep -q "^passed *recipe: $t .*(emulated: qemu-aarch64)" "$TMP/pttest.out" || fail "recipe test $t did not pass emulated"
  done
  grep -q "^passed *builtin: pytorch import .*cuda 13.0" "$TMP/pttest.out" || fail "torch did not report CUDA 13.0"
fi
say "builds from $state: arm64 $arm_s s, amd64 $amd_s s (ratio $(python3 -c "print(round($arm_s / max($amd_s, 0.1), 2))"))"
pass
