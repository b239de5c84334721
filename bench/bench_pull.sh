#!/usr/bin/env bash
# Pull throughput: stackbuild pull against skopeo copy, from the same local registry
# (distribution 2.8, plain HTTP, 127.0.0.1) into an OCI layout.
#
#   SB=build/stackbuild bash bench/bench_pull.sh [SRC]   (default SRC: /usr/local/cuda)
#   SB=build/stackbuild bash bench/bench_pull.sh --smoke (a tiny tree, 1 round; bench/lib.sh)
#
# The image is built from a copy of SRC, one gzip layer per top-level directory of SRC,
# and pushed once. Then ROUNDS rounds (default 3), each pulling it once with each tool
# into a new layout (and, for stackbuild, an empty store), the order swapped every round:
#   skopeo copy docker://REG/bench:1 oci:DIR:1       (digests checked as it copies)
#   stackbuild pull REG/bench:1 DIR:1 --store EMPTY  (digests checked before a blob
#                                                     enters the store)
# Both run with their default parallelism. Prints each round, the medians (MB/s of blob
# bytes) and the ratio skopeo time / stackbuild time (bar: >= 1).
# Environment: SB, ROUNDS, WORK (scratch, default a new folder under /tmp, removed at the
# end; it needs about 3 x the blobs' size).
# Not a test: run it by hand on a quiet machine (--smoke is, in the default test run).
# MB is 10^6 bytes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
bench_setup bench_pull "${1:-/usr/local/cuda}" docker-registry skopeo curl python3

log "building the image from $SRC ..."
bench_tree_image "$SB" "$SRC" "$W" || die "the build failed"
BLOBS=$(du -sb "$W/layout/blobs" | cut -f1)
PORT=$(bench_port)
REG=127.0.0.1:$PORT
bench_registry_start "$W" "$PORT" || die "no registry"
"$SB" push "$W/layout:1" "$REG/bench:1" --store "$W/pushstore" --progress plain >"$W/push.log" 2>&1 ||
  { cat "$W/push.log" >&2; die "the push failed"; }
rm -rf "$W/pushstore" "$W/layout"
log "image: $((BLOBS >> 20)) MiB of blobs in $REG/bench:1"

pull_skopeo() { skopeo copy -q --src-tls-verify=false "docker://$REG/bench:1" "oci:$W/out:1" >/dev/null; }
pull_stackbuild() {
  "$SB" pull "$REG/bench:1" "$W/out:1" --store "$W/store" --insecure-registry "$REG" \
    --progress plain >"$W/pull.log" 2>&1 || { cat "$W/pull.log" >&2; return 1; }
}
timed() {  # timed TOOL: prints the seconds of one pull into a fresh layout (and store)
  rm -rf "$W/out" "$W/store"
  sync
  local t0 t1
  t0=$(bench_now)
  "pull_$1" || die "$1 failed"
  t1=$(bench_now)
  python3 -c "print(f'{$t1-$t0:.3f}')"
}

times=()
for ((r = 0; r < ROUNDS; r++)); do
  if (( r % 2 == 0 )); then a=$(timed skopeo); b=$(timed stackbuild)
  else b=$(timed stackbuild); a=$(timed skopeo); fi
  log "round $((r + 1))/$ROUNDS: skopeo $a s, stackbuild $b s"
  times+=("$a $b")
done
rm -rf "$W/out" "$W/store"

bench_against_skopeo bench_pull pull "$BLOBS" "${times[@]}"
bench_smoke_note
