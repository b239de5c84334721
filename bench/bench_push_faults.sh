#!/usr/bin/env bash
# Pushes through a fault-injecting proxy: stackbuild push vs skopeo copy --retry-times 3
# of the same OCI layout (a ~127 MB image: one layer of random bytes and a small one) to
# the same local registry (distribution 2.8), N times each (default 5). Run i of both
# tools goes through a fresh proxy with seed i (tests/integration/registry/faultproxy.py:
# connections cut mid-body, 500s, 429 with Retry-After, on --rate of the requests). A
# run completes when the tool exits 0 and the registry holds the image's manifest digest.
#   SB=build/stackbuild bash bench/bench_push_faults.sh [N] [RATE] [CUT_MODE]
#   SB=build/stackbuild bash bench/bench_push_faults.sh --smoke [RATE] [CUT_MODE]
# --smoke: one run each (seed 1) of a 3 MiB image (still over the proxy's 1 MiB cut
# threshold), each push bounded to 120 s; it checks that both tools ran and the summary
# printed, not how many completed (bench/lib.sh).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BENCH_NAME=bench_push_faults
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; set -- 1 "$@"; fi
SB=${SB:-build/stackbuild}
SB=$(cd "$(dirname "$SB")" && pwd)/$(basename "$SB")
HERE=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-5}
RATE=${2:-0.3}
MODE=${3:-buffer}
BIG_MIB=127 LIMIT=900
if [[ $SMOKE == 1 ]]; then BIG_MIB=3 LIMIT=120; fi
for t in docker-registry skopeo curl python3; do command -v $t >/dev/null || { echo "bench_push_faults: needs $t"; exit 77; }; done
W=$(mktemp -d /tmp/bench_push_faults.XXXXXX)
PIDS=()
# shellcheck disable=SC2154  # p is the loop's own variable, inside the quoted trap
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null || true; done; rm -rf "$W"' EXIT

mkdir -p "$W/src/big" "$W/src/small"
python3 -c 'import random,sys; open(sys.argv[1],"wb").write(random.Random(7).randbytes(int(sys.argv[2])<<20))' \
  "$W/src/big/data.bin" "$BIG_MIB"
echo hello >"$W/src/small/hello.txt"
cat >"$W/src/r.yaml" <<YAML
stack: faults
layers:
  - {name: big, copy: [{src: big/, dst: /big/}]}
  - {name: small, copy: [{src: small/, dst: /small/}]}
tags: ["faults:1"]
YAML
"$SB" build "$W/src/r.yaml" -o "$W/layout" --store "$W/store" --progress plain --level 1 >"$W/build.log" 2>&1 ||
  { cat "$W/build.log" >&2; echo "bench_push_faults: the build failed" >&2; exit 1; }
M=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$W/layout/index.json")
echo "bench_push_faults: image $(du -sb "$W/layout/blobs" | cut -f1) bytes of blobs, manifest $M"

REG=$(bench_port)
bench_registry_start "$W" "$REG" || exit 1
PIDS+=("$BENCH_REGISTRY_PID")

# proxy SEED LOG: a fresh fault proxy in front of the registry; sets PROXY and PPID_.
proxy() {
  rm -f "$W/pport"
  python3 "$HERE/tests/integration/registry/faultproxy.py" --upstream "127.0.0.1:$REG" --port-file "$W/pport" \
    --log "$2" --seed "$1" --rate "$RATE" --cut-min 1048576 --cut-mode "$MODE" 2>/dev/null &
  PPID_=$!
  PIDS+=("$PPID_")
  for _ in $(seq 100); do [[ -s $W/pport ]] && break; sleep 0.1; done
  PROXY=$(cat "$W/pport")
}
holds() { [[ "$(skopeo inspect --tls-verify=false --raw "docker://127.0.0.1:$REG/$1:1" 2>/dev/null | sha256sum | cut -d' ' -f1)" == "${M#sha256:}" ]]; }
faults() { python3 -c 'import json,sys,collections; c=collections.Counter(json.loads(l)["fault"] for l in open(sys.argv[1])); print(" ".join(f"{k}={v}" for k,v in sorted(c.items(), key=str) if k))' "$1"; }

sk_ok=0 sb_ok=0
for i in $(seq "$N"); do
  proxy "$i" "$W/sk$i.jsonl"
  t0=$(date +%s.%N)
  rc=0; timeout "$LIMIT" skopeo copy -q --retry-times 3 --dest-tls-verify=false "oci:$W/layout:1" \
    "docker://127.0.0.1:$PROXY/skopeo$i:1" >"$W/sk$i.log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  kill $PPID_; wait $PPID_ 2>/dev/null || true
  ok=no; [[ $rc == 0 ]] && holds "skopeo$i" && ok=yes && sk_ok=$((sk_ok + 1))
  printf 'bench_push_faults: run %d skopeo:     completed=%-3s rc=%-3s %6.1f s  faults: %s\n' "$i" "$ok" "$rc" \
    "$(echo "$t1 - $t0" | bc)" "$(faults "$W/sk$i.jsonl")"
  [[ $ok == yes ]] || echo "    $(grep -v '^$' "$W/sk$i.log" | tail -1 | cut -c1-160)"

  proxy "$i" "$W/sb$i.jsonl"
  t0=$(date +%s.%N)
  rc=0; timeout "$LIMIT" "$SB" push "$W/layout:1" "127.0.0.1:$PROXY/stackbuild$i:1" --store "$W/store$i" \
    --progress plain >"$W/sb$i.log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  kill $PPID_; wait $PPID_ 2>/dev/null || true
  ok=no; [[ $rc == 0 ]] && holds "stackbuild$i" && ok=yes && sb_ok=$((sb_ok + 1))
  printf 'bench_push_faults: run %d stackbuild: completed=%-3s rc=%-3s %6.1f s  faults: %s\n' "$i" "$ok" "$rc" \
    "$(echo "$t1 - $t0" | bc)" "$(faults "$W/sb$i.jsonl")"
  [[ $ok == yes ]] && echo "    $(grep '^blobs:' "$W/sb$i.log")" || echo "    $(tail -1 "$W/sb$i.log" | cut -c1-160)"
done
echo "bench_push_faults: completed pushes through the proxy (rate $RATE, $MODE cuts): skopeo $sk_ok/$N, stackbuild $sb_ok/$N"
bench_smoke_note
