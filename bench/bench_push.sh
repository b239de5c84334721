#!/usr/bin/env bash
# Push throughput: stackbuild push vs skopeo copy of the same OCI layout to the same
# local registry (distribution 2.8, plain HTTP, 127.0.0.1). The image is a ~1.3 GB
# gzip image made of a copy of SRC (default /usr/local/cuda, else /usr). Prints both
# throughputs (MB/s of blob bytes, the median of ROUNDS rounds, default 2, each on a
# fresh registry with the order swapped) and the ratio (bar: >= 1).
#   SB=build/stackbuild bash bench/bench_push.sh [SRC]
#   SB=build/stackbuild bash bench/bench_push.sh --smoke   (a tiny tree, 1 round; bench/lib.sh)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BENCH_NAME=bench_push
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
SB=${SB:-build/stackbuild}
SB=$(cd "$(dirname "$SB")" && pwd)/$(basename "$SB")
SRC=${1:-/usr/local/cuda}
[[ -d $SRC ]] || SRC=/usr
for t in docker-registry skopeo curl python3; do command -v $t >/dev/null || { echo "bench_push: needs $t"; exit 77; }; done
W=$(mktemp -d /tmp/bench_push.XXXXXX)
trap 'bench_registry_stop; rm -rf "$W"' EXIT
if [[ $SMOKE == 1 ]]; then bench_smoke_tree "$W/smoke-src"; SRC=$W/smoke-src; fi
mkdir -p "$W/recipe"
ln -s "$(readlink -f "$SRC")" "$W/recipe/src"
cat >"$W/recipe/r.yaml" <<YAML
stack: benchpush
layers:
  - {name: tree, copy: [{src: src/, dst: /opt/tree/}]}
tags: ["benchpush:1"]
YAML
echo "bench_push: building the image from $SRC ..."
# src links to a host tree outside the recipe's directory: --allow-host-paths.
"$SB" build "$W/recipe/r.yaml" -o "$W/layout" --store "$W/store" --progress plain --level 1 --allow-host-paths \
  >"$W/build.log" 2>&1 || { cat "$W/build.log" >&2; echo "bench_push: the build failed" >&2; exit 1; }
BYTES=$(du -sb "$W/layout/blobs" | cut -f1)
PORT=$(bench_port)
push_skopeo() { skopeo copy -q --dest-tls-verify=false "oci:$W/layout:1" "docker://127.0.0.1:$PORT/skopeo:1" >/dev/null; }
push_sb() {
  rm -rf "$W/store2"  # a store that remembers no registry: every blob is sent
  "$SB" push "$W/layout:1" "127.0.0.1:$PORT/stackbuild:1" --store "$W/store2" --progress plain >"$W/push.log" 2>&1
}
# ROUNDS rounds (default 2), each on a fresh registry, the order swapped every
# round so that neither tool always meets a warm or a cold registry.
ROUNDS=${ROUNDS:-2}
[[ $SMOKE == 1 ]] && ROUNDS=1
times=()
for r in $(seq "$ROUNDS"); do
  bench_registry_start "$W" "$PORT" || exit 1
  if (( r % 2 )); then
    t0=$(bench_now); push_skopeo; t1=$(bench_now); push_sb; t2=$(bench_now)
    times+=("$(python3 -c "print($t1-$t0, $t2-$t1)")")
  else
    t0=$(bench_now); push_sb; t1=$(bench_now); push_skopeo; t2=$(bench_now)
    times+=("$(python3 -c "print($t2-$t1, $t1-$t0)")")
  fi
  bench_registry_stop
done
bench_against_skopeo bench_push push "$BYTES" "${times[@]}"
bench_smoke_note
