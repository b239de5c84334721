#!/usr/bin/env bash
# The registry as the only shared state of a fan-out (issue 35): several `stackbuild
# build --push-to ... --cache-to ...` processes, each with its own store (as machines
# are), push the same layers, blobs, manifests and cache to one real registry
# (distribution 2.8 on 127.0.0.1) at the same moment. Every one succeeds with the same
# digests; afterwards every tag of both repositories names manifests whose blobs are all
# there with their digests (registry_check.py), and a machine with an empty store takes
# every layer from the cache they wrote. Before put_manifest retried a PUT refused with
# DIGEST_INVALID (distribution rewrites a manifest in place; a concurrent reader sees it half
# written), a build failed so ("400 digest invalid" putting the index) on this test's first run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
start_registry plain
REG="127.0.0.1:$REG_PORT"

R="$TMP/recipe"
mkdir -p "$R"/data-{a,b}
# A layer every point shares (4 MiB of random bytes: its upload takes a while, so the
# processes overlap on it), and one of each point's own.
python3 -c 'import random,sys; open(sys.argv[1],"wb").write(random.Random(1).randbytes(4<<20))' "$R/shared.bin"
for f in a b; do echo "point $f" >"$R/data-$f/own.txt"; done
cat >"$R/race.yaml" <<'YAML'
stack: race
source_date_epoch: 1700000000
matrix:
  flavor: [a, b]
layers:
  - {name: shared, copy: [{src: shared.bin, dst: /opt/shared.bin}]}
  - {name: own, copy: [{src: "data-${flavor}/", dst: /opt/own/}]}
tags: ["race:${flavor}"]
YAML

N=4
check "$N builds push the same blobs and cache to one registry at once: all succeed"
pids=()
for i in $(seq "$N"); do
  sb build "$R/race.yaml" --store "$TMP/store$i" -o "$TMP/out$i" --no-verify \
    --push-to "$REG/team/race" --cache-to "$REG/team/cache" >"$TMP/race$i.out" 2>"$TMP/race$i.err" &
  pids+=($!)
done
for i in $(seq "$N"); do
  rc=0
  wait "${pids[i-1]}" || rc=$?
  [[ $rc == 0 ]] || { show_output "race$i"; fail "build $i exited $rc"; }
done
for i in $(seq 2 "$N"); do
  for ref in a b race-matrix; do
    [[ $(manifest_digest "$TMP/out$i" $ref) == $(manifest_digest "$TMP/out1" $ref) ]] ||
      fail "build $i made another $ref than build 1"
  done
done
sent=$(cat "$TMP"/race*.err | grep -c "sent .* at " || true)
say "blob uploads that sent bytes, over the $N builds: $sent"

check "every tag of the images and of the cache is whole: manifests and blobs there, with their digests"
for repo in team/race team/cache; do
  python3 "$HERE/registry_check.py" "$REG" "$repo" >"$TMP/check-${repo#team/}.out" 2>&1 ||
    { cat "$TMP/check-${repo#team/}.out" >&2; fail "$repo is inconsistent"; }
done
for ref in a b race-matrix; do
  grep -q "^team/race:$ref sha256:$(manifest_digest "$TMP/out1" $ref)$" "$TMP/check-race.out" ||
    { cat "$TMP/check-race.out" >&2; fail "team/race:$ref is not the image the builds made"; }
done

check "a machine with an empty store takes every layer from the cache they wrote"
expect_ok fresh sb build "$R/race.yaml" --store "$TMP/store-fresh" -o "$TMP/fresh" --no-verify \
  --cache-from "$REG/team/cache"
n=$(grep -c "(from the cache $REG/team/cache:buildcache)" "$TMP/fresh.err" || true)
[[ $n == 3 ]] || { show_output fresh; fail "expected 3 layers from the cache, got $n"; }
[[ $(manifest_digest "$TMP/fresh" race-matrix) == $(manifest_digest "$TMP/out1" race-matrix) ]] ||
  fail "the build from the cache made another index"
pass
