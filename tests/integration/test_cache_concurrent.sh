#!/usr/bin/env bash
# Several writers of one build cache at once (issue 35): one build per matrix point, each
# with its own empty store (as the tasks of a cluster fan-out are), `--cache-to` the same
# tag of one real registry (distribution 2.8 on 127.0.0.1) at the same moment. They push
# through a proxy that forwards 1 MiB a second, so that each one's read of the cache index
# and its write of it are seconds apart and the writers overlap. Afterwards a build with an
# empty store and `--cache-from` that tag takes every point's layers from the cache and
# builds none. Before each point's manifest got a tag of its own, the index (read, merged,
# put back) was the only record and the last writer's index won: this test found 1 of 3
# points in the cache.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
start_registry plain
REG="127.0.0.1:$REG_PORT"
python3 "$HERE/slow_proxy.py" --upstream "$REG" --port-file "$TMP/slow.port" --rate $((1 << 20)) \
  --progress "$TMP/slow.sent" 2>"$TMP/slow.err" &
REG_PIDS+=($!)
SLOW=127.0.0.1:$(wait_port_file "$TMP/slow.port")

POINTS=(a b c)
R="$TMP/recipe"
mkdir -p "$R"
echo shared >"$R/shared.txt"
# Each point's own layer: 2 MiB of random bytes (incompressible), 2 s through the proxy.
for f in "${POINTS[@]}"; do
  mkdir -p "$R/data-$f"
  python3 -c 'import random,sys; open(sys.argv[1],"wb").write(random.Random(sys.argv[2]).randbytes(2<<20))' \
    "$R/data-$f/own.bin" "$f"
done
cat >"$R/cc.yaml" <<'YAML'
stack: cc
source_date_epoch: 1700000000
matrix:
  flavor: [a, b, c]
layers:
  - {name: shared, copy: [{src: shared.txt, dst: /opt/shared.txt}]}
  - {name: own, copy: [{src: "data-${flavor}/", dst: /opt/own/}]}
tags: ["cc:${flavor}"]
YAML

check "${#POINTS[@]} builds, one point each, write the cache tag ci at the same moment: all succeed"
pids=()
for f in "${POINTS[@]}"; do
  sb build "$R/cc.yaml" --only "flavor=$f" --store "$TMP/store-$f" -o "$TMP/out-$f" --no-verify \
    --cache-to "$SLOW/team/cache:ci" >"$TMP/write-$f.out" 2>"$TMP/write-$f.err" &
  pids+=($!)
done
for i in "${!POINTS[@]}"; do
  rc=0
  wait "${pids[i]}" || rc=$?
  [[ $rc == 0 ]] || { show_output "write-${POINTS[i]}"; fail "the build of flavor=${POINTS[i]} exited $rc"; }
done

check "a build with an empty store takes every point's layers from the cache, and builds none"
expect_ok fresh sb build "$R/cc.yaml" --store "$TMP/store-fresh" -o "$TMP/fresh" --no-verify \
  --cache-from "$REG/team/cache:ci"
n=$(grep -c "(from the cache $REG/team/cache:ci)" "$TMP/fresh.err" || true)
# The shared layer (one key for every point) and each point's own.
[[ $n == $((1 + ${#POINTS[@]})) ]] ||
  { show_output fresh; fail "expected $((1 + ${#POINTS[@]})) layers from the cache, got $n"; }
grep -q "3 points (3 from their own tags)" "$TMP/fresh.err" ||
  { show_output fresh; fail "the cache was not read from the points' own tags"; }
for f in "${POINTS[@]}"; do
  [[ $(manifest_digest "$TMP/fresh" "$f") == $(manifest_digest "$TMP/out-$f" "$f") ]] ||
    fail "the build from the cache made another image of flavor=$f than its writer"
done

check "the index under ci is a stackbuild cache (what older readers read), and each point has a tag of its own"
python3 - "$REG" <<'PY' >"$TMP/tags.out" || { cat "$TMP/tags.out" >&2; fail "the cache's tags are not as expected"; }
import json, re, sys, urllib.request
base = f"http://{sys.argv[1]}/v2/team/cache"
tags = json.load(urllib.request.urlopen(f"{base}/tags/list"))["tags"]
print("tags:", tags)
req = urllib.request.Request(f"{base}/manifests/ci", headers={"Accept": "application/vnd.oci.image.index.v1+json"})
idx = json.load(urllib.request.urlopen(req))
assert idx["artifactType"] == "application/vnd.stackbuild.cache.v1", idx
print("index points:", [d["annotations"]["dev.stackbuild.point"] for d in idx["manifests"]])
own = sorted(t for t in tags if re.fullmatch(r"ci--[0-9a-f]{16}", t))
assert len(own) == 3, f"expected 3 tags ci--<hash>, got {own}"
points = set()
for t in own:
    req = urllib.request.Request(f"{base}/manifests/{t}", headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    m = json.load(urllib.request.urlopen(req))
    assert m["artifactType"] == "application/vnd.stackbuild.cache.v1", m
    points.add(m["annotations"]["dev.stackbuild.point"])
assert points == {"flavor=a", "flavor=b", "flavor=c"}, points
PY
say "$(tr '\n' ' ' <"$TMP/tags.out")"

pass
