#!/usr/bin/env bash
# The example framework (examples/minitensor/) compiles inside a cuda-base image
# stackbuild builds from Debian's archive and NVIDIA's wheels, for exactly the
# requested GPU archs: examples/minitensor-wheels.yaml (which extends
# recipes/cuda-base-wheels.yaml) for one CUDA point (SB_MINITENSOR_CUDA, default
# 13.2), plus a layer of the point's nvidia-cuda-cuobjdump wheel (13.2's for 13.0)
# under the minitensor layer, so that the image's own cuobjdump lists what was built.
# Checks, in the unpacked image (chroot): `stackbuild cuda-code` and the image's
# `cuobjdump --list-elf` (and the host's, where installed) name sm_80 and sm_90 and
# nothing else, no PTX, in libminitensor.so; minitensor_test has no GPU code; the
# image's ldd resolves cuDNN, cuBLAS, NCCL and the runtime to the wheels'
# site-packages/nvidia tree through the library's RUNPATH alone; /opt/minitensor
# holds the example's source and ARCHS, and the SBOM names that tree. `stackbuild test` passes (libraries resolve,
# CUDA code for 8.0 and 9.0, versions, the recipe's tests; GPU tests skipped without
# a GPU) and fails its arch check for --arch 8.0,10.0 on libminitensor.so alone.
# With --set arch=8.6 the image differs in the minitensor layer alone: sm_86 only.
# Label e2e: the base needs ~2.5 GB of downloads the first time (SB_E2E_STORE=DIR
# keeps them between runs) and ~10 GB of scratch space; not in the default run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
source "$(dirname "$0")/../integration/lib.sh"
require_tool chroot tar
[[ $(id -u) == 0 ]] || skip "chroot and the build sandbox need root here"
S=${SB_E2E_STORE:-$STORE}
CUDA=${SB_MINITENSOR_CUDA:-13.2}
avail=$(df -Pk "$TMP" | awk 'NR==2 {print $4}')
(( avail > ${SB_E2E_NEED_GB:-10} * 1024 * 1024 )) || skip "needs ${SB_E2E_NEED_GB:-10} GB free in $TMP (SB_E2E_NEED_GB)"
# The host's cuobjdump also cross-checks, where it is installed (CUOBJDUMP, PATH, the toolkit).
HOST_CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
[[ -x $HOST_CUOBJDUMP ]] || HOST_CUOBJDUMP=
cd "$TMP"
# The cuobjdump wheel exists from CUDA 13.2 on: an older point gets 13.2's (a newer
# cuobjdump reads what an older nvcc wrote).
cuobjdump_release=$CUDA
[[ $(printf '%s\n' "$CUDA" 13.2 | sort -V | head -1) == 13.2 ]] || cuobjdump_release=13.2

cat >t.yaml <<EOF
extends: $SB_SOURCE_DIR/examples/minitensor-wheels.yaml
layers:
  - {name: cuobjdump, below: minitensor, pip: ["nvidia-cuda-cuobjdump==$cuobjdump_release.*"]}
tags: ["minitensor-wheels:e2e-cuda\${cuda}"]
EOF
REF=e2e-cuda$CUDA

# build ARCH OUT: the recipe's point cuda=$CUDA for --set arch=ARCH into the layout OUT.
build() {
  local start=$SECONDS
  # linux/amd64: the checks chroot into the image (test_cuda_base_wheels_arm64.sh builds arm64).
  expect_ok "build-$2" sb build t.yaml --only "cuda=$CUDA" --only platform=linux/amd64 --set "arch=$1" -o "$2" --store "$S"
  cat "build-$2.out" "build-$2.err" | grep -A3 '^summary' || true
  say "build for arch $1: $((SECONDS - start)) s"
}
# elf_sass ROOT FILE: the SASS the image's cuobjdump --list-elf names in FILE (a path in
# ROOT), sorted, space-separated; with the host's cuobjdump, fails unless it agrees.
elf_sass() {
  local out names host
  out=$(chroot "$1" /usr/local/cuda/bin/cuobjdump --list-elf "$2" 2>&1) || fail "cuobjdump --list-elf $2: $out"
  names=$(grep -o 'sm_[0-9]*[af]\?' <<<"$out" | sort -u | tr '\n' ' ' | sed 's/ $//')
  if [[ -n $HOST_CUOBJDUMP ]]; then
    host=$("$HOST_CUOBJDUMP" --list-elf "$1$2" | grep -o 'sm_[0-9]*[af]\?' | sort -u | tr '\n' ' ' | sed 's/ $//')
    [[ $host == "$names" ]] || fail "$2: the host's cuobjdump says '$host', the image's '$names'"
  fi
  echo "$names"
}
# no_ptx ROOT FILE: fails unless the image's cuobjdump finds no PTX in FILE.
no_ptx() {
  local out
  out=$(chroot "$1" /usr/local/cuda/bin/cuobjdump --list-ptx "$2" 2>&1) || true
  grep -q 'No PTX file found' <<<"$out" || fail "cuobjdump --list-ptx $2: $out"
}

check "examples/minitensor-wheels.yaml builds for cuda=$CUDA arch=8.0,9.0 (cuda-base-wheels' layers, make, cuobjdump, minitensor)"
build 8.0,9.0 out
digest=$(manifest_digest out "$REF") || fail "no $REF in the layout"
root=$TMP/root
expect_ok unpack sb unpack "out:$REF" "$root"
say "$(du -sh "$root" | cut -f1) unpacked"
lib=/usr/local/lib/libminitensor.so exe=/usr/local/bin/minitensor_test
[[ -f $root$lib && -x $root$exe ]] || fail "the image has no $lib or $exe"
[[ -x $root/usr/local/lib/python3.11/dist-packages/nvidia/cu13/bin/cuobjdump ]] ||
  fail "no cuobjdump from the wheel in the image's CUDA tree"

check "libminitensor.so carries SASS for exactly sm_80 and sm_90, no PTX (stackbuild cuda-code, cuobjdump: the image's${HOST_CUOBJDUMP:+ and the host }${HOST_CUOBJDUMP})"
got=$("$SB" cuda-code "$root$lib") || fail "stackbuild cuda-code $lib failed"
[[ ${got#"$root$lib: "} == "sm_80 sm_90" ]] || fail "stackbuild cuda-code: expected 'sm_80 sm_90', got '$got'"
got=$(elf_sass "$root" "$lib")
[[ $got == "sm_80 sm_90" ]] || fail "cuobjdump --list-elf $lib: expected 'sm_80 sm_90', got '$got'"
no_ptx "$root" "$lib"
got=$("$SB" cuda-code "$root$exe") || fail "stackbuild cuda-code $exe failed"
[[ $got == "$root$exe: no GPU code" ]] || fail "$exe: expected no GPU code, got '$got'"
out=$(chroot "$root" /usr/local/cuda/bin/cuobjdump --list-elf "$exe" 2>&1) || true
grep -q 'does not contain device code' <<<"$out" || fail "cuobjdump --list-elf $exe: $out"

check "the image's ldd resolves cuDNN, cuBLAS, NCCL and cudart to the wheels by the RUNPATH alone"
out=$(chroot "$root" /usr/bin/env -i /usr/bin/ldd "$exe" 2>&1) || fail "ldd $exe: $out"
! grep -q 'not found' <<<"$out" || fail "ldd $exe: $out"
site=/usr/local/lib/python3.11/dist-packages/nvidia
for want in "libminitensor.so => /usr/local/bin/../lib/libminitensor.so" "libcudnn.so.9 => $site/cudnn/lib/" "libnccl.so.2 => $site/nccl/lib/" \
            "libcublas.so.13 => /usr/local/cuda/lib/" "libcudart.so.13 => /usr/local/cuda/lib/"; do
  grep -qF "$want" <<<"$out" || fail "ldd $exe has no '$want': $out"
done

check "/opt/minitensor holds the example's source and ARCHS (sm_80, sm_90), without the build directory"
for f in Makefile gencode.sh src/kernels.cu src/matmul.cpp src/conv.cpp src/allreduce.cpp \
         include/minitensor/minitensor.hpp test/minitensor_test.cpp; do
  cmp -s "$root/opt/minitensor/$f" "$SB_SOURCE_DIR/examples/minitensor/$f" || fail "/opt/minitensor/$f differs from the example's"
done
[[ $(tr '\n' ' ' <"$root/opt/minitensor/ARCHS" | sed 's/ $//') == "sm_80 sm_90" ]] ||
  fail "/opt/minitensor/ARCHS says '$(cat "$root/opt/minitensor/ARCHS")'"
[[ ! -e $root/opt/minitensor/build ]] || fail "/opt/minitensor/build is still in the image"

check "the SBOM names the tree the minitensor layer was compiled from and keeps at /opt/minitensor"
expect_ok sbom sb sbom "out:$REF" --store "$S" -o "$TMP/minitensor.spdx.json"
python3 - "$TMP/minitensor.spdx.json" <<'PY' || fail "the SBOM does not describe the minitensor source"
import json, sys
d = json.load(open(sys.argv[1]))
src = [p for p in d["packages"] if p.get("primaryPackagePurpose") == "SOURCE"]
assert [p["name"] for p in src] == ["minitensor"], src
p = src[0]
assert p["versionInfo"].startswith("sha256:") and p["downloadLocation"] == "NOASSERTION", p  # a local directory
assert "kept in the image at /opt/minitensor" in p["comment"], p
rels = {r["relationshipType"] for r in d["relationships"] if r["relatedSpdxElement"] == p["SPDXID"]}
assert rels == {"CONTAINS", "GENERATED_FROM"}, rels
PY

# run_test NAME ARGS...: stackbuild test of the image with ARGS; sets RC; gives back the
# root `test` unpacked in the store unless it was there before.
had_root=no
[[ -d $S/roots/$digest || -d $S/roots/sha256-$digest ]] && had_root=yes
run_test() {
  run_capture "$1" sb test "out:$REF" --store "$S" --report "$TMP/$1.json" "${@:2}"
  if [[ $had_root == no ]]; then rm -rf "$S/roots/$digest" "$S/roots/sha256-$digest"; fi
}

check "stackbuild test: the static checks and the recipe's tests pass (GPU tests skipped without a GPU)"
run_test test
(( RC == 0 )) || { show_output test; fail "stackbuild test exited $RC"; }
cat test.out
python3 - test.json <<'PY' || fail "the report of stackbuild test"
import json, sys
doc = json.load(open(sys.argv[1]))
reports = doc if isinstance(doc, list) else [doc]
by = {}
for r in (r for rep in reports for r in rep["results"]):
    by.setdefault(r["outcome"], []).append(r["name"])
assert not by.get("failed"), by
for name in ("static: libraries resolve", "static: CUDA code for every requested arch",
             "static: versions match the lockfile", "recipe: archs", "recipe: loads", "recipe: nvcc"):
    assert name in by.get("passed", []), (name, by)
assert "recipe: minitensor-gpu" in by.get("passed", []) + by.get("skipped", []), by
PY

# (8.6 would pass: sm_80 SASS runs on every 8.x GPU; sm_90 SASS runs on no 10.0 GPU.)
check "stackbuild test --arch 8.0,10.0 fails its arch check on libminitensor.so alone"
run_test test100 --arch 8.0,10.0
(( RC == 1 )) || { show_output test100; fail "stackbuild test --arch 8.0,10.0 exited $RC, expected 1"; }
python3 - test100.json <<'PY' || { show_output test100; fail "the report of stackbuild test --arch 8.0,10.0"; }
import json, sys
doc = json.load(open(sys.argv[1]))
rep = doc[0] if isinstance(doc, list) else doc
r = [r for r in rep["results"] if r["name"] == "static: CUDA code for every requested arch"][0]
assert r["outcome"] == "failed", r
assert r.get("details") == ["/usr/local/lib/libminitensor.so: no code for sm_100 (has sm_80 sm_90)"], r
print(r["details"][0])
PY

check "--set arch=8.6 changes the minitensor layer alone: sm_86 only"
build 8.6 out86
# The layers' digests (not the build's "N built", which a kept store's cache decides).
python3 - out out86 "$REF" >top.txt <<'PY' || fail "the images for 8.0,9.0 and 8.6"
import json, sys
ref = sys.argv[3]
def layers(d):
    blob = lambda dg: f"{d}/blobs/{dg.replace(':', '/')}"
    idx = json.load(open(f"{d}/index.json"))
    m = [m for m in idx["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == ref][0]
    return [blob(l["digest"]) for l in json.load(open(blob(m["digest"])))["layers"]]
a, b = layers(sys.argv[1]), layers(sys.argv[2])
names = [p.rsplit("/", 1)[1] for p in a], [p.rsplit("/", 1)[1] for p in b]
# The same layers but minitensor's (the pip constraints layer stays on top).
differ = [i for i in range(min(len(a), len(b))) if names[0][i] != names[1][i]]
if len(a) != len(b) or len(differ) != 1:
    sys.exit(f"expected the same layers but one: {names[0]} vs {names[1]}")
print(b[differ[0]])
PY
mkdir top && tar -C top -xzf "$(cat top.txt)"
[[ -f top$lib ]] || fail "the top layer of the arch 8.6 image has no $lib"
got=$("$SB" cuda-code "top$lib") || fail "stackbuild cuda-code failed"
[[ ${got#"top$lib: "} == "sm_86" ]] || fail "arch 8.6: stackbuild cuda-code says '$got'"
cp "top$lib" "$root/tmp/lib86.so"
got=$(elf_sass "$root" /tmp/lib86.so)
[[ $got == "sm_86" ]] || fail "arch 8.6: cuobjdump --list-elf says '$got'"
[[ $(cat top/opt/minitensor/ARCHS) == "sm_86" ]] || fail "arch 8.6: /opt/minitensor/ARCHS says '$(cat top/opt/minitensor/ARCHS)'"
pass
