#!/usr/bin/env bash
# How stackbuild's layer writing, unpacking and building scale with cores (issue 39's
# table), on this machine, stackbuild alone (no other tool is needed, so that it runs on a
# device machine that has no network to install umoci or pigz):
#
#   bash bench/bench_cores.sh [TREE]    (default TREE: the CUDA toolkit's lib64, links resolved)
#   bash bench/bench_cores.sh --smoke   (a tiny tree made here, one round, -j 1 and 2)
#
#   1. `stackbuild layer TREE` with gzip and zstd at each -j of JOBS_LIST (default
#      "1 4 16"), best of N runs (default 2), warm page cache: seconds and MB/s of the
#      uncompressed tar. Each compression's digest must be the same at every -j: a
#      different one fails the run.
#   2. `stackbuild unpack` of an image of SRC (the CUDA toolkit by default: one gzip
#      layer per top-level directory, bench/lib.sh's bench_tree_image), ROUNDS rounds
#      (default 3, each into a fresh directory, the previous one removed and synced
#      untimed): the median, MB/s of unpacked bytes.
#   3. `stackbuild build` of that image's recipe from an empty store, ROUNDS rounds: the
#      median, with layers written ahead (the default) and with `--write-ahead 0` (each
#      layer written before the next begins) in the same rounds, and their ratio. The two
#      must give the same image: a different digest fails the run.
# Prints the table and the bars of issue 39 for a 16-core machine (gzip layer >= 1.2 GB/s at
# the largest -j, unpack >= 1 GB/s); STRICT=1 exits 1 when one is missed (not with
# --smoke).
#
# stackbuild: $SB, else build/stackbuild, else the GPU bundle that the device tool carries
# (build/gpu-bundle.tar.gz from tests/gpu/bundle.sh, unpacked here). On a device machine:
#   bash tests/gpu/bundle.sh                      (here, before the call)
#   run: OUT_DIR=$OUT bash bench/bench_cores.sh   (there; the table is also written to
#                                                  $OUT_DIR/bench_cores.txt)
# Environment: SB, SRC (the image's tree; default /usr/local/cuda), JOBS_LIST, N, ROUNDS,
# WORK (scratch; it needs about 3 x SRC's size), STRICT, OUT_DIR. MB is 10^6 bytes.
# Not a test: run it by hand on a quiet machine (--smoke is, in the default test run).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi

# stackbuild from the GPU bundle when there is no build here (a device machine).
if [[ -z ${SB:-} && ! -x "$here/../build/stackbuild" ]]; then
  bundle_tmp=$(mktemp -d /tmp/bench_cores-sb.XXXXXX)
  if [[ -x "$here/../build/gpu-bundle/bin/stackbuild" ]]; then
    bundle=$here/../build/gpu-bundle
  elif [[ -s "$here/../build/gpu-bundle.tar.gz" ]]; then
    tar -xzf "$here/../build/gpu-bundle.tar.gz" -C "$bundle_tmp"
    bundle=$bundle_tmp/gpu-bundle
  else
    echo "bench_cores: no stackbuild: build it, give SB=PATH, or run tests/gpu/bundle.sh" >&2
    exit 1
  fi
  bundle=$(cd "$bundle" && pwd)
  # shellcheck disable=SC2016  # the wrapper expands them when it runs
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/bin/stackbuild "$@"\n' \
    "$bundle" "$bundle" >"$bundle_tmp/stackbuild"
  chmod +x "$bundle_tmp/stackbuild"
  SB=$bundle_tmp/stackbuild
fi

# The layer's tree: the toolkit's lib64 (a link to targets/*/lib), as the issue measured.
tree_default() {
  local cuda=${CUDA_HOME:-/usr/local/cuda}
  readlink -f "$cuda/lib64" 2>/dev/null || echo "$cuda/lib64"
}
TREE=${1:-$(tree_default)}
bench_setup bench_cores "${SRC:-/usr/local/cuda}" python3
trap 'rm -rf "$W" ${bundle_tmp:+"$bundle_tmp"}' EXIT
if [[ $SMOKE == 1 ]]; then
  TREE=$SRC JOBS_LIST="1 2" N=1
else
  [[ -d "$TREE" ]] || die "no directory at $TREE (give TREE as the argument)"
  TREE=$(readlink -f "$TREE")
fi
JOBS_LIST=${JOBS_LIST:-1 4 16}
N=${N:-2}
[[ "$N" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer"
for j in $JOBS_LIST; do [[ "$j" =~ ^[1-9][0-9]*$ ]] || die "JOBS_LIST holds '$j', not a thread count"; done
cores=$(nproc)
need=$(( $(du -sb "$SRC" | cut -f1) * 3 ))
free=$(( $(df -Pk "$W" | awk 'NR == 2 { print $4 }') * 1024 ))
(( free > need )) || die "$W has $((free >> 20)) MiB free; about $((need >> 20)) MiB are needed (set WORK=...)"

log "$cores cores; layer tree $TREE; image tree $SRC; -j $JOBS_LIST; best of $N, $ROUNDS rounds"
tar_bytes=$(tar --sort=name -C "$TREE" -cf - . | wc -c)   # reads every file: the cache is warm

# --- 1. layer writing at each -j -----------------------------------------------------------
results=()   # "COMP J SECONDS DIGEST"
for comp in gzip zstd; do
  for j in $JOBS_LIST; do
    best=""
    for ((i = 0; i < N; i++)); do
      rm -rf "$W/store"
      t0=$(bench_now)
      "$SB" layer "$TREE" --compression "$comp" -j "$j" --store "$W/store" >"$W/layer.json" 2>"$W/layer.err" ||
        { cat "$W/layer.err" >&2; die "stackbuild layer --compression $comp -j $j failed"; }
      t1=$(bench_now)
      s=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$t0" "$t1")
      if [[ -z $best ]] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$s" "$best"; then
        best=$s
      fi
    done
    digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$W/layer.json")
    log "layer $comp -j $j: best $best s, $digest"
    results+=("$comp $j $best $digest")
  done
done
rm -rf "$W/store"

# --- 2. unpack and 3. build of a multi-layer image -----------------------------------------
log "building the image of $SRC ..."
bench_tree_image "$SB" "$SRC" "$W" || die "the image did not build"
cat "$W"/layout/blobs/sha256/* >/dev/null
unpack_times=() build_times=() serial_times=() build_digests=()
for ((r = 0; r < ROUNDS; r++)); do
  rm -rf "$W/t"; sync
  t0=$(bench_now)
  "$SB" unpack "$W/layout:1" "$W/t" >/dev/null || die "stackbuild unpack failed"
  t1=$(bench_now)
  unpack_times+=("$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1")")
  for ahead in default 0; do
    extra=(); [[ $ahead == 0 ]] && extra=(--write-ahead 0)
    rm -rf "$W/store" "$W/out"; sync
    t0=$(bench_now)
    "$SB" build "$W/recipe/r.yaml" -o "$W/out" --store "$W/store" --progress plain --allow-host-paths \
      "${extra[@]}" >"$W/build.log" 2>&1 || { cat "$W/build.log" >&2; die "stackbuild build failed"; }
    t1=$(bench_now)
    s=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1")
    if [[ $ahead == 0 ]]; then serial_times+=("$s"); else build_times+=("$s"); fi
    build_digests+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' \
      "$W/out/index.json")")
  done
done
unpacked=$(du -sb "$W/t" | cut -f1)
layers=$(grep -c '^  - ' "$W/recipe/r.yaml" || true)
rm -rf "$W/t" "$W/store" "$W/out"

report=$(python3 - "$cores" "$tar_bytes" "$unpacked" "$layers" "${STRICT:-0}" "$SMOKE" "${unpack_times[*]}" \
  "${build_times[*]}" "${serial_times[*]}" "${build_digests[*]}" "${results[@]}" <<'PY'
import statistics, sys
cores, tar_bytes, unpacked, layers = (int(a) for a in sys.argv[1:5])
strict, smoke = sys.argv[5] == "1", sys.argv[6] == "1"
unpack = [float(x) for x in sys.argv[7].split()]
build = [float(x) for x in sys.argv[8].split()]
serial = [float(x) for x in sys.argv[9].split()]
build_digests = set(sys.argv[10].split())
rows = [r.split() for r in sys.argv[11:]]
jobs = list(dict.fromkeys(r[1] for r in rows))
out = [f"bench_cores: {cores} cores; stackbuild layer of a {tar_bytes/1e9:.2f} GB tree (seconds, MB/s)",
       "| | " + " | ".join(f"-j {j}" for j in jobs) + " |", "|---|" + "---|" * len(jobs)]
bad = []
for comp in dict.fromkeys(r[0] for r in rows):
    cells, digests = [], set()
    for j in jobs:
        s, d = next((float(r[2]), r[3]) for r in rows if r[0] == comp and r[1] == j)
        digests.add(d)
        cells.append(f"{s:.2f} s ({tar_bytes/s/1e6:.0f} MB/s)")
    out.append(f"| {comp} | " + " | ".join(cells) + " |")
    if len(digests) != 1:
        bad.append(f"{comp}: the digest differs between -j values: {sorted(digests)}")
u, b = statistics.median(unpack), statistics.median(build)
out.append(f"bench_cores: unpack of the {layers}-layer image: {u:.2f} s, {unpacked/u/1e6:.0f} MB/s (median of {len(unpack)})")
bs = statistics.median(serial)
out.append(f"bench_cores: build of that {layers}-layer recipe from an empty store: {b:.2f} s with layers written "
           f"ahead, {bs:.2f} s with --write-ahead 0: {bs/b:.2f}x (medians of {len(build)})")
if len(build_digests) != 1:
    bad.append(f"build: the image differs between --write-ahead values: {sorted(build_digests)}")
gz = min(float(r[2]) for r in rows if r[0] == "gzip" and r[1] == jobs[-1])
bars = [(f"gzip layer at -j {jobs[-1]}", tar_bytes / gz / 1e6, 1200), ("unpack", unpacked / u / 1e6, 1000)]
missed = False
for name, got, want in bars:
    ok = got >= want
    missed |= not ok
    out.append(f"bench_cores: {name} {got:.0f} MB/s (16-core bar >= {want}: {'meets it' if ok else 'misses it'})")
print("\n".join(out))
for m in bad:
    print("bench_cores: FAILED: " + m)
sys.exit(2 if bad else (1 if strict and missed and not smoke else 0))
PY
) || rc=$?
echo "$report"
if [[ -n ${OUT_DIR:-} ]]; then mkdir -p "$OUT_DIR" && echo "$report" >"$OUT_DIR/bench_cores.txt"; fi
bench_smoke_note
exit "${rc:-0}"
