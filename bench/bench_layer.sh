#!/usr/bin/env bash
# shellcheck disable=SC2317  # the setup and run functions are called through best_of
# Layer-writing throughput and size: stackbuild against umoci and shell pipelines.
#
#   bash bench/bench_layer.sh [TREE]          (default TREE: /usr/local/cuda, ~2.7 GB)
#   bash bench/bench_layer.sh --smoke         (a tiny tree made here, N=1, no bar enforced)
#
# On one tree, with a warm page cache, best of $N runs each (wall-clock):
#   stackbuild layer TREE --compression gzip / zstd / estargz / zstd:chunked
#                                                     (a fresh --store each run)
#   umoci repack of TREE as a new layer of an empty image (the unpack is not timed)
#   tar --sort=name | tee >(sha256sum) | pigz -p2 -n | tee >(sha256sum) > blob
#   the same with zstd -3 -T2
# and, once, the size of `tar --sort=name | gzip -6` (the size bar; slow: SKIP_GZIP6=1
# skips it). Prints a table (seconds, MB/s of uncompressed tar bytes, output size) and the
# ratios with their bars:
#   stackbuild-gzip MB/s / umoci MB/s            >= 5   (issue 39, on 2 cores)
#   stackbuild-gzip size / gzip -6 size          <= 1.05
#   stackbuild-zstd MB/s / zstd pipeline MB/s    >= 3   (issue 39, on 2 cores)
#   stackbuild-estargz MB/s / stackbuild-zstd MB/s       >= 0.8
#   stackbuild-zstd:chunked MB/s / stackbuild-zstd MB/s  >= 0.8
#
# Environment: SB (default: build/stackbuild of this checkout), N (runs, default 3),
# WORK (scratch folder, default a new one under /tmp, removed at the end; it needs about
# 2.5 x the tree's size for umoci's bundle and the blobs), JOBS (passed as -j to
# stackbuild; default: stackbuild's own, one thread per core), SKIP_GZIP6=1,
# SKIP_UMOCI=1, STRICT=1 (exit 1 when a bar is missed; not with --smoke).
# Not a test: run it by hand on a quiet machine (--smoke is, in the default test run).
# MB is 10^6 bytes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
BENCH_NAME=bench_layer
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
SB=${SB:-$here/../build/stackbuild}
N=${N:-3}
TREE=${1:-/usr/local/cuda}
if [[ $SMOKE == 1 ]]; then N=1 STRICT=; fi
die() { printf 'bench_layer: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_layer: %s\n' "$*" >&2; }

[[ -x "$SB" ]] || die "no stackbuild at $SB (set SB=...)"
if [[ $SMOKE != 1 ]]; then   # the smoke tree is made in WORK, below
  [[ -e "$TREE" ]] || die "no tree at $TREE"
  TREE=$(readlink -f "$TREE")                # /usr/local/cuda is a symlink to cuda-X.Y
  [[ -d "$TREE" ]] || die "$TREE is not a directory"
fi
for t in tar pigz zstd gzip sha256sum; do command -v $t >/dev/null || bench_skip "'$t' is not installed"; done
if [[ "${SKIP_UMOCI:-}" != 1 ]]; then command -v umoci >/dev/null || bench_skip "'umoci' is not installed (or SKIP_UMOCI=1)"; fi
[[ "$N" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer"

if [[ -n "${WORK:-}" ]]; then
  mkdir -p "$WORK"
  WORK=$(mktemp -d "$WORK/bench_layer.XXXXXX")
else
  WORK=$(mktemp -d /tmp/bench_layer.XXXXXX)
fi
trap 'rm -rf "$WORK"' EXIT
if [[ $SMOKE == 1 ]]; then bench_smoke_tree "$WORK/smoke-tree"; TREE=$WORK/smoke-tree; fi
jobs_opt=()
[[ -n "${JOBS:-}" ]] && jobs_opt=(-j "$JOBS")

now() { date +%s.%N; }
# best_of NAME SETUP_FN RUN_FN: runs SETUP_FN (untimed) then RUN_FN (timed) N times;
# keeps the best time in SECS[NAME]; RUN_FN sets OUT_SIZE.
declare -A SECS SIZE
best_of() {
  local name=$1 setup=$2 run=$3 i t0 t1 best=
  for ((i = 1; i <= N; i++)); do
    $setup
    t0=$(now)
    $run
    t1=$(now)
    local dt
    dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    log "$name run $i/$N: ${dt}s, $OUT_SIZE bytes"
    if [[ -z "$best" ]] || awk -v a="$dt" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$dt; fi
  done
  SECS[$name]=$best
  SIZE[$name]=$OUT_SIZE
}
filesize() { stat -c %s "$1"; }

# --- the tree, and a warm page cache ---------------------------------------------------
tree_bytes=$(du -sb "$TREE" | cut -f1)
free_bytes=$(( $(df -Pk "$WORK" | awk 'NR == 2 { print $4 }') * 1024 ))
(( free_bytes > tree_bytes * 5 / 2 )) ||
  die "$WORK has $((free_bytes >> 20)) MiB free; about $((tree_bytes * 5 / 2 >> 20)) MiB are needed (set WORK=...)"
log "tree $TREE: $((tree_bytes >> 20)) MiB; warming the page cache"
TAR_BYTES=$(tar --sort=name -C "$TREE" -cf - . | wc -c)     # reads every file: the cache is warm
tar --sort=name -C "$TREE" -cf - . | wc -c >/dev/null
log "uncompressed tar: $TAR_BYTES bytes"

# --- (a) stackbuild layer ----------------------------------------------------------------
sb_setup() { rm -rf "$WORK/store"; }
sb_run() {
  "$SB" layer "$TREE" --compression "$SB_COMP" --store "$WORK/store" --progress plain "${jobs_opt[@]}" \
    >"$WORK/sb.json" 2>"$WORK/sb.err" || { cat "$WORK/sb.err" >&2; die "stackbuild layer failed"; }
  OUT_SIZE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["size"])' "$WORK/sb.json")
}
SB_COMP=gzip; best_of "stackbuild layer (gzip)" sb_setup sb_run
SB_COMP=zstd; best_of "stackbuild layer (zstd)" sb_setup sb_run
SB_COMP=estargz; best_of "stackbuild layer (estargz)" sb_setup sb_run
SB_COMP=zstd:chunked; best_of "stackbuild layer (zstd:chunked)" sb_setup sb_run
rm -rf "$WORK/store"

# --- (b) umoci repack ---------------------------------------------------------------------
if [[ "${SKIP_UMOCI:-}" != 1 ]]; then
  log "umoci: preparing a bundle holding the tree (not timed)"
  umoci init --layout "$WORK/L.orig" >/dev/null
  umoci new --image "$WORK/L.orig:t" >/dev/null
  umoci unpack --rootless --image "$WORK/L.orig:t" "$WORK/B" >/dev/null
  cp -a "$WORK/B" "$WORK/B.meta.orig"                         # the empty bundle's metadata
  cp -a "$TREE/." "$WORK/B/rootfs/"
  umoci_setup() {   # restore the layout and the bundle's metadata: the next repack sees the whole tree as new
    rm -rf "$WORK/L"
    cp -a "$WORK/L.orig" "$WORK/L"
    find "$WORK/B" -maxdepth 1 -type f -delete
    find "$WORK/B.meta.orig" -maxdepth 1 -type f -exec cp -a {} "$WORK/B/" \;
  }
  umoci_run() {
    umoci repack --image "$WORK/L:t" "$WORK/B" >/dev/null 2>"$WORK/umoci.err" || { cat "$WORK/umoci.err" >&2; die "umoci repack failed"; }
    OUT_SIZE=$(python3 - "$WORK/L" <<'PY'
import json, sys
L = sys.argv[1]
idx = json.load(open(f"{L}/index.json"))
m = json.load(open(f"{L}/blobs/sha256/{idx['manifests'][-1]['digest'].split(':')[1]}"))
print(m["layers"][-1]["size"])
PY
)
  }
  best_of "umoci repack" umoci_setup umoci_run
  rm -rf "$WORK/B" "$WORK/B.meta.orig" "$WORK/L" "$WORK/L.orig"
fi

# --- (c) shell pipelines, hashing the tar and the blob like stackbuild does -----------------
pipe_setup() { rm -f "$WORK/blob" "$WORK/d1" "$WORK/d2" "$WORK/f1" "$WORK/f2"; mkfifo "$WORK/f1" "$WORK/f2"; }
pipe_run() {
  sha256sum <"$WORK/f1" >"$WORK/d1" &
  local p1=$!
  sha256sum <"$WORK/f2" >"$WORK/d2" &
  local p2=$!
  tar --sort=name -C "$TREE" -cf - . | tee "$WORK/f1" | $COMPRESSOR | tee "$WORK/f2" >"$WORK/blob"
  wait "$p1" "$p2"
  OUT_SIZE=$(filesize "$WORK/blob")
}
COMPRESSOR="pigz -p2 -n"; best_of "tar | pigz -p2 -n" pipe_setup pipe_run
COMPRESSOR="zstd -3 -T2 -q"; best_of "tar | zstd -3 -T2" pipe_setup pipe_run
rm -f "$WORK/blob" "$WORK/f1" "$WORK/f2"

# --- (d) the size of gzip -6 ------------------------------------------------------------------
if [[ "${SKIP_GZIP6:-}" != 1 ]]; then
  log "gzip -6 (once, for its size; slow)"
  t0=$(now)
  g6=$(tar --sort=name -C "$TREE" -cf - . | gzip -6 | wc -c)
  t1=$(now)
  SECS["tar | gzip -6 (once)"]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  SIZE["tar | gzip -6 (once)"]=$g6
fi

# --- the table and the ratios -----------------------------------------------------------------
mbps() { awk -v b="$TAR_BYTES" -v s="$1" 'BEGIN { if (s > 0) printf "%.1f", b / s / 1e6; else print "inf" }'; }
echo
printf 'tree: %s (%s bytes of tar), best of %s, %s\n\n' "$TREE" "$TAR_BYTES" "$N" "$("$SB" version 2>/dev/null | head -1)"
printf '%-32s %10s %10s %15s %8s\n' tool seconds MB/s "output bytes" ratio
for name in "stackbuild layer (gzip)" "stackbuild layer (zstd)" "stackbuild layer (estargz)" \
    "stackbuild layer (zstd:chunked)" "umoci repack" "tar | pigz -p2 -n" "tar | zstd -3 -T2" "tar | gzip -6 (once)"; do
  [[ -n "${SECS[$name]:-}" ]] || continue
  printf '%-32s %10s %10s %15s %8s\n' "$name" "${SECS[$name]}" "$(mbps "${SECS[$name]}")" "${SIZE[$name]}" \
    "$(awk -v a="${SIZE[$name]}" -v b="$TAR_BYTES" 'BEGIN { printf "%.3f", a / b }')"
done
echo
missed=0
# bar NAME VALUE OP LIMIT
bar() {
  local ok
  ok=$(awk -v v="$2" -v l="$4" -v op="$3" 'BEGIN { print (op == ">=" ? v >= l : v <= l) ? "meets the bar" : "MISSES the bar" }')
  printf '%-48s %8s   (bar %s %s: %s)\n' "$1" "$2" "$3" "$4" "$ok"
  [[ $ok == "meets the bar" ]] || missed=1
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
g="stackbuild layer (gzip)"; z="stackbuild layer (zstd)"
# Throughput ratios are time ratios turned over: the same bytes in each run.
[[ -n "${SECS[umoci repack]:-}" ]] && bar "stackbuild-gzip throughput / umoci" "$(ratio "${SECS[umoci repack]}" "${SECS[$g]}")" ">=" 5
[[ -n "${SIZE[tar | gzip -6 (once)]:-}" ]] && bar "stackbuild-gzip size / gzip -6 size" "$(ratio3 "${SIZE[$g]}" "${SIZE[tar | gzip -6 (once)]}")" "<=" 1.05
bar "stackbuild-zstd throughput / zstd -3 -T2 pipeline" "$(ratio "${SECS[tar | zstd -3 -T2]}" "${SECS[$z]}")" ">=" 3
e="stackbuild layer (estargz)"; c="stackbuild layer (zstd:chunked)"
bar "stackbuild estargz / zstd throughput" "$(ratio "${SECS[$z]}" "${SECS[$e]}")" ">=" 0.8
bar "stackbuild zstd:chunked / zstd throughput" "$(ratio "${SECS[$z]}" "${SECS[$c]}")" ">=" 0.8
printf '%-48s %8s   (no bar)\n' "stackbuild estargz / gzip throughput" "$(ratio "${SECS[$g]}" "${SECS[$e]}")"
printf '%-48s %8s   (no bar)\n' "stackbuild-gzip throughput / pigz -p2 pipeline" "$(ratio "${SECS[tar | pigz -p2 -n]}" "${SECS[$g]}")"
bench_smoke_note
if [[ $missed -ne 0 && "${STRICT:-}" == 1 ]]; then exit 1; fi
exit 0
