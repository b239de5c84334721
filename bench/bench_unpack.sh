#!/usr/bin/env bash
# Unpack throughput: stackbuild unpack against umoci on the same OCI layout.
#
#   SB=build/stackbuild bash bench/bench_unpack.sh [SRC]   (default SRC: /usr/local/cuda)
#   SB=build/stackbuild bash bench/bench_unpack.sh --smoke (a tiny tree, 1 round; bench/lib.sh)
#
# The image is built once from a copy of SRC, one gzip layer per top-level directory of
# SRC (links to directories left out). Then ROUNDS rounds (default 3), each
# running every tool once into a fresh directory, in an order that rotates every round so
# that none always goes first. Timed (wall-clock, page cache warm, target removed untimed):
#   stackbuild unpack LAYOUT:1 DIR        (digests checked, safe extractor)
#   umoci raw unpack --image LAYOUT:1 DIR (the root filesystem only, as stackbuild)
#   umoci unpack --image LAYOUT:1 BUNDLE  (also writes its mtree manifest)
#   pigz -dc BLOB | tar -x, layer by layer (no digest check, no whiteouts: a lower bound
#                                            of what the disk and gzip allow)
# Prints each round, the medians (MB/s of unpacked bytes) and the ratios
# (umoci raw / stackbuild; bar: >= 4 on 2 cores, issue 39).
# Environment: SB, ROUNDS, WORK (scratch, default a new folder under /tmp, removed at the
# end; it needs about 3.5 x SRC's size), SKIP_UMOCI_BUNDLE=1 (skip `umoci unpack`).
# Not a test: run it by hand on a quiet machine (--smoke is, in the default test run).
# MB is 10^6 bytes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
bench_setup bench_unpack "${1:-/usr/local/cuda}" umoci pigz tar python3
(( $(id -u) == 0 )) || bench_skip "run as root: umoci unpack as another user needs --rootless, which does more"

src_bytes=$(du -sb "$SRC" | cut -f1)
free_bytes=$(( $(df -Pk "$W" | awk 'NR == 2 { print $4 }') * 1024 ))
(( free_bytes > src_bytes * 7 / 2 )) ||
  die "$W has $((free_bytes >> 20)) MiB free; about $((src_bytes * 7 / 2 >> 20)) MiB are needed (set WORK=...)"

log "building the image from $SRC ($((src_bytes >> 20)) MiB) ..."
bench_tree_image "$SB" "$SRC" "$W" || die "the build failed"
BLOBS=$(du -sb "$W/layout/blobs" | cut -f1)
mapfile -t LAYERS < <(python3 - "$W/layout" <<'PY'
import json, sys
lay = sys.argv[1]
idx = json.load(open(f"{lay}/index.json"))
m = next(m for m in idx["manifests"]
         if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "1")
man = json.load(open(f"{lay}/blobs/" + m["digest"].replace(":", "/")))
for l in man["layers"]:
    print(f"{lay}/blobs/" + l["digest"].replace(":", "/"))
PY
)
log "image: ${#LAYERS[@]} layers, $((BLOBS >> 20)) MiB of blobs; warming the page cache"
cat "$W"/layout/blobs/sha256/* >/dev/null

run_stackbuild() { "$SB" unpack "$W/layout:1" "$W/t" >/dev/null; }
run_umoci_raw() { umoci raw unpack --image "$W/layout:1" "$W/t" >/dev/null 2>&1; }
run_umoci() { umoci unpack --image "$W/layout:1" "$W/t" >/dev/null 2>&1; }
run_pigz_tar() {
  mkdir "$W/t"
  local l
  for l in "${LAYERS[@]}"; do pigz -dc "$l" | tar -x -C "$W/t"; done
}
TOOLS=(stackbuild umoci_raw pigz_tar)
[[ "${SKIP_UMOCI_BUNDLE:-}" == 1 ]] || TOOLS+=(umoci)

UNPACKED=
times=()
for ((r = 0; r < ROUNDS; r++)); do
  line=""
  for ((k = 0; k < ${#TOOLS[@]}; k++)); do
    tool=${TOOLS[$(( (k + r) % ${#TOOLS[@]} ))]}
    rm -rf "$W/t"
    sync
    t0=$(bench_now)
    "run_$tool" || die "$tool failed"
    t1=$(bench_now)
    if [[ $tool == stackbuild && -z $UNPACKED ]]; then UNPACKED=$(du -sb "$W/t" | cut -f1); fi
    line+="$tool=$(python3 -c "print(f'{$t1-$t0:.3f}')") "
  done
  log "round $((r + 1))/$ROUNDS: $line"
  times+=("$line")
done
rm -rf "$W/t"

python3 - "$UNPACKED" "$BLOBS" "${times[@]}" <<'PY'
import statistics, sys
unpacked, blobs = int(sys.argv[1]), int(sys.argv[2])
runs = [dict(kv.split("=") for kv in t.split()) for t in sys.argv[3:]]
med = {k: statistics.median(float(r[k]) for r in runs) for k in runs[0]}
names = {"stackbuild": "stackbuild unpack", "umoci_raw": "umoci raw unpack",
         "umoci": "umoci unpack (+mtree)", "pigz_tar": "pigz -dc | tar -x"}
print(f"bench_unpack: {unpacked/1e6:.0f} MB unpacked from {blobs/1e6:.0f} MB of blobs, "
      f"median of {len(runs)} rounds")
for k in ["stackbuild", "umoci_raw", "umoci", "pigz_tar"]:
    if k in med:
        print(f"bench_unpack: {names[k]:<24} {med[k]:7.2f} s  {unpacked/med[k]/1e6:7.1f} MB/s")
sb = med["stackbuild"]
print(f"bench_unpack: ratio umoci raw unpack / stackbuild  {med['umoci_raw']/sb:.2f}  (bar: >= 4)")
if "umoci" in med:
    print(f"bench_unpack: ratio umoci unpack / stackbuild      {med['umoci']/sb:.2f}")
print(f"bench_unpack: ratio pigz|tar / stackbuild          {med['pigz_tar']/sb:.2f}")
PY
bench_smoke_note
