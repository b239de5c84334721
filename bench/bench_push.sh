#!/usr/bin/env bash
# Push throughput: stackbuild push vs skopeo copy of the same OCI layout to the same
# local registry (distribution 2.8, plain HTTP, 127.0.0.1). The image is a ~1.3 GB
# gzip image made of a copy of SRC (default /usr/local/cuda, else /usr). Prints both
# throughputs (MB/s of blob bytes) and the ratio (bar: >= 1).
#   SB=build/stackbuild bash bench/bench_push.sh [SRC]
set -euo pipefail
SB=${SB:-build/stackbuild}
SB=$(cd "$(dirname "$SB")" && pwd)/$(basename "$SB")
SRC=${1:-/usr/local/cuda}
[[ -d $SRC ]] || SRC=/usr
for t in docker-registry skopeo curl python3; do command -v $t >/dev/null || { echo "bench_push: needs $t"; exit 77; }; done
W=$(mktemp -d /tmp/bench_push.XXXXXX)
trap 'kill $RP 2>/dev/null || true; rm -rf "$W"' EXIT
mkdir -p "$W/recipe"
ln -s "$(readlink -f "$SRC")" "$W/recipe/src"
cat >"$W/recipe/r.yaml" <<YAML
stack: benchpush
layers:
  - {name: tree, copy: [{src: src/, dst: /opt/tree/}]}
tags: ["benchpush:1"]
YAML
echo "bench_push: building the image from $SRC ..."
"$SB" build "$W/recipe/r.yaml" -o "$W/layout" --store "$W/store" --progress plain --level 1 >/dev/null 2>&1
BYTES=$(du -sb "$W/layout/blobs" | cut -f1)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$W/config.yml" <<YAML
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $W/data}}
http: {addr: 127.0.0.1:$PORT, secret: bench}
YAML
docker-registry serve "$W/config.yml" >"$W/reg.log" 2>&1 &
RP=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/v2/" && break; sleep 0.1; done
now() { date +%s.%N; }
t0=$(now)
skopeo copy -q --dest-tls-verify=false "oci:$W/layout:1" "docker://127.0.0.1:$PORT/skopeo:1" >/dev/null
t1=$(now)
"$SB" push "$W/layout:1" "127.0.0.1:$PORT/stackbuild:1" --store "$W/store2" --progress plain >"$W/push.log" 2>&1
t2=$(now)
python3 - "$BYTES" "$t0" "$t1" "$t2" <<'PY'
import sys
b, t0, t1, t2 = int(sys.argv[1]), *map(float, sys.argv[2:])
sk, sb = b / (t1 - t0) / 1e6, b / (t2 - t1) / 1e6
print(f"bench_push: image {b/1e6:.0f} MB of blobs")
print(f"bench_push: skopeo copy      {t1-t0:6.2f} s  {sk:7.1f} MB/s")
print(f"bench_push: stackbuild push  {t2-t1:6.2f} s  {sb:7.1f} MB/s")
print(f"bench_push: ratio (stackbuild/skopeo) {sb/sk:.2f}")
PY
