#!/usr/bin/env bash
# The CUDA base image from NVIDIA's wheels (recipes/cuda-base-wheels.yaml) for both
# of its CUDA points, linux/amd64 (test_cuda_base_wheels_arm64.sh takes linux/arm64): Debian 12 from the configured apt archive, the CUDA runtime,
# nvcc, cuBLAS, cuDNN and NCCL wheels from the configured Python index. Each image
# is unpacked and, inside it with chroot, /usr/local/cuda/bin/nvcc prints the
# point's resolved CUDA release (and the nvcc build the catalog pins) and compiles
# a kernel with the image's g++; `stackbuild test` of each image passes its static
# checks and the recipe's tests (GPU tests skipped without a GPU).
# Label e2e: downloads ~2.5 GB the first time (SB_E2E_STORE=DIR keeps them between
# runs) and needs ~15 GB of scratch space; not in the default run.
# SB_CUDA_WHEELS_RECIPE=FILE runs the same checks on another recipe (a child of it).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
require_tool chroot
[[ $(id -u) == 0 ]] || skip "chroot and the build sandbox need root here"
S=${SB_E2E_STORE:-$STORE}
RECIPE=${SB_CUDA_WHEELS_RECIPE:-$SB_SOURCE_DIR/recipes/cuda-base-wheels.yaml}
avail=$(df -Pk "$TMP" | awk 'NR==2 {print $4}')
(( avail > ${SB_E2E_NEED_GB:-15} * 1024 * 1024 )) || skip "needs ${SB_E2E_NEED_GB:-15} GB free in $TMP (SB_E2E_NEED_GB)"

check "the recipe resolves to two CUDA releases whose records pin an nvcc wheel"
sb plan "$RECIPE" --json >"$TMP/plan.json" 2>/dev/null || fail "plan failed"
# One line per point: ref (the tag after ':'), resolved CUDA, the nvcc wheel the record pins.
python3 - "$TMP/plan.json" "$SB_SOURCE_DIR/layers/cuda.yaml" >"$TMP/points" <<'PY'
import json, re, sys
plan = json.load(open(sys.argv[1]))
catalog = open(sys.argv[2]).read()
for p in plan["points"]:
    if p["matrix"].get("platform", "linux/amd64") != "linux/amd64":
        continue
    if "resolved" not in p:
        sys.exit(f"point {p['matrix']} did not resolve")
    cuda = p["resolved"]["versions"]["cuda"]
    block = re.search(r'- version: "%s".*?(?=\n  - version:|\Z)' % re.escape(cuda), catalog, re.S)
    pin = re.search(r'nvidia-cuda-nvcc(?:-cu\d+)?==([0-9.]+)', block.group(0)) if block else None
    if not pin:
        sys.exit(f"layers/cuda.yaml: the record of cuda {cuda} pins no nvcc wheel")
    print(p["tags"][0].split(":", 1)[1], cuda, pin.group(1))
PY
cat "$TMP/points"
(( $(wc -l <"$TMP/points") == 2 )) || fail "expected two points"

check "build writes both points into one layout"
start=$(date +%s.%N)
amd64=()  # the recipe's amd64 points where it has a platform key
grep -q "platform" "$TMP/plan.json" && amd64=(--only platform=linux/amd64)
sb build "$RECIPE" "${amd64[@]}" -o "$TMP/out" --store "$S" >"$TMP/build.out" 2>&1 || fail "build: $(tail -30 "$TMP/build.out")"
cold=$(python3 -c "import time; print(round(time.time() - $start, 1))")
grep -A8 "^summary\|summary (" "$TMP/build.out" || true
say "build: $cold s"

while read -r ref cuda nvcc_pin <&3; do
  release=$(cut -d. -f1,2 <<<"$cuda")
  check "$ref: nvcc inside the unpacked image prints release $release, V$nvcc_pin"
  manifest_digest "$TMP/out" "$ref" >/dev/null || fail "no $ref in the layout"
  python3 - "$TMP/out" "$ref" <<'PY'
import json, sys, os
d, ref = sys.argv[1], sys.argv[2]
idx = json.load(open(os.path.join(d, "index.json")))
m = [m for m in idx["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == ref][0]
doc = json.load(open(os.path.join(d, "blobs", *m["digest"].split(":"))))
print(f"{ref}: {len(doc['layers'])} layers, {sum(l['size'] for l in doc['layers']) / 1e9:.2f} GB compressed")
PY
  root="$TMP/root"
  sb unpack "$TMP/out:$ref" "$root" >/dev/null || fail "unpack $ref"
  say "$ref: $(du -sh "$root" | cut -f1) unpacked"
  [[ -L $root/usr/local/cuda ]] || fail "/usr/local/cuda is not a link"
  out=$(chroot "$root" /usr/local/cuda/bin/nvcc --version 2>&1) || fail "nvcc --version in $ref: $out"
  say "$(grep release <<<"$out")"
  grep -q "release $release, V$nvcc_pin\$" <<<"$out" || fail "$ref resolved cuda $cuda (nvcc $nvcc_pin), nvcc says: $out"
  # What nvcc is built from is the wheel the catalog pins, as installed.
  ls -d "$root"/usr/local/lib/python3*/dist-packages/nvidia_cuda_nvcc*-"$nvcc_pin".dist-info >/dev/null ||
    fail "$ref: no nvidia-cuda-nvcc $nvcc_pin in the image"
  # Every toolkit wheel in the image is of the point's release (none pulled in newer).
  wrong=$(cd "$root"/usr/local/lib/python3*/dist-packages &&
          ls -d nvidia_cuda_*.dist-info nvidia_nvvm-*.dist-info nvidia_nvjitlink*.dist-info 2>/dev/null |
          grep -v -- "-$release\.[0-9]*\.dist-info\$" || true)
  [[ -z $wrong ]] || fail "$ref: toolkit wheels not of CUDA $release: $wrong"

  check "$ref: nvcc compiles a kernel with the image's g++ (PATH and CUDA_HOME from the image config)"
  printf '__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n' >"$root/tmp/k.cu"
  out=$(chroot "$root" /usr/bin/env -i PATH=/usr/local/cuda/bin:/usr/bin:/bin CUDA_HOME=/usr/local/cuda \
          nvcc -c -o /tmp/k.o /tmp/k.cu 2>&1) || fail "nvcc -c in $ref: $out"
  [[ -s $root/tmp/k.o ]] || fail "$ref: nvcc wrote no object"
  rm -rf "$root"

  check "$ref: stackbuild test passes its static checks and the recipe's tests; the built-in programs compile with the image's nvcc"
  digest=$(manifest_digest "$TMP/out" "$ref")
  had_root=no
  [[ -d $S/roots/sha256-$digest || -d $S/roots/$digest ]] && had_root=yes
  rc=0
  sb test "$TMP/out:$ref" --store "$S" --compile-builtins --report "$TMP/report-$ref.json" >"$TMP/test-$ref.out" 2>&1 || rc=$?
  # The unpacked root `test` left in the store is this test's: give the space back.
  if [[ $had_root == no ]]; then rm -rf "$S/roots/sha256-$digest" "$S/roots/$digest"; fi
  (( rc == 0 )) || fail "test $ref: $(tail -30 "$TMP/test-$ref.out")"
  cat "$TMP/test-$ref.out"
  python3 - "$TMP/report-$ref.json" <<'PY' || fail "report of $ref"
import json, sys
doc = json.load(open(sys.argv[1]))
reports = doc if isinstance(doc, list) else doc.get("reports", [doc])
results = [r for rep in reports for r in rep["results"]]
by = {}
for r in results:
    by.setdefault(r["outcome"], []).append(r["name"])
assert not by.get("failed"), by
# No arch is requested: of the static checks, libraries resolve and versions run.
for name in ("static: libraries resolve", "static: versions match the lockfile"):
    assert name in by.get("passed", []), by
# The image's nvcc compiles every built-in program (cuda_fp16.h needs the CCCL
# wheel; -lcudart the link to the wheel's libcudart.so.13).
for c in ("cuda", "cublas", "cudnn", "nccl"):
    assert "builtin: compile " + c in by.get("passed", []), by
assert any("nvcc" in n for n in by.get("passed", [])), by
print({k: len(v) for k, v in by.items()})
PY
done 3<"$TMP/points"
pass
