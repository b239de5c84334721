#!/usr/bin/env bash
# `build --push` of a matrix against the real registry (distribution 2.8, plain HTTP on
# 127.0.0.1): every point under its tag and the matrix index (a multi-manifest image
# index) under <stack>-matrix, as skopeo sees them; --push-to REPO:TAG tags the index
# TAG; a second push sends no blob bytes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo

R="$TMP/recipe"
mkdir -p "$R"
echo "shared" >"$R/common.txt"
for f in a b; do echo "flavor $f" >"$R/$f.txt"; done
start_registry plain
REG="127.0.0.1:$REG_PORT"
cat >"$R/mx.yaml" <<YAML
stack: mx
source_date_epoch: 1700000000
matrix:
  flavor: [a, b]
layers:
  - {name: base, copy: [{src: common.txt, dst: /etc/common.txt}]}
  - {name: flavor, copy: [{src: "\${flavor}.txt", dst: /etc/flavor.txt}]}
tags: ["mx:\${flavor}"]
push: ["$REG/team/mx:\${flavor}-x"]
YAML

check "build --push sends each point to its push: target and the index under mx-matrix"
expect_ok b1 sb build "$R/mx.yaml" -o "$TMP/out" --store "$STORE" --push
for p in a b; do
  want="sha256:$(manifest_digest "$TMP/out" $p)"
  got=$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$REG/team/mx:$p-x")
  [[ "$got" == "$want" ]] || fail "point $p: the registry has $got, the layout $want"
done
skopeo inspect --tls-verify=false --raw "docker://$REG/team/mx:mx-matrix" >"$TMP/index.json" ||
  fail "no index under mx-matrix"
cmp "$TMP/index.json" "$TMP/out/blobs/sha256/$(manifest_digest "$TMP/out" mx-matrix)" ||
  fail "the pushed index differs from the layout's"
python3 - "$TMP/index.json" "$(manifest_digest "$TMP/out" a)" "$(manifest_digest "$TMP/out" b)" <<'PY' ||
import json, sys
ms = json.load(open(sys.argv[1]))["manifests"]
assert [m["digest"] for m in ms] == ["sha256:" + sys.argv[2], "sha256:" + sys.argv[3]], ms
assert [m["annotations"]["dev.stackbuild.matrix.flavor"] for m in ms] == ["a", "b"], ms
PY
  fail "the pushed index does not list both points"

check "skopeo copies the whole matrix index back (every point)"
skopeo copy -q --all --src-tls-verify=false "docker://$REG/team/mx:mx-matrix" "oci:$TMP/back:all" >/dev/null ||
  fail "skopeo copy --all of the index"
[[ "$(manifest_digest "$TMP/back" all)" == "$(manifest_digest "$TMP/out" mx-matrix)" ]] ||
  fail "skopeo copied back another index"

check "--push-to REPO:TAG: each point under its ref name, the index under TAG; nothing resent"
start_proxy "$REG_PORT" "$TMP/count.jsonl" --rate 0
# --no-verify: the gate would attach a new test report (a new blob) to each image.
expect_ok b2 sb build "$R/mx.yaml" -o "$TMP/out" --store "$STORE" --no-verify --push-to "127.0.0.1:$PROXY_PORT/team/mx:all"
[[ "$(blob_bytes "$TMP/count.jsonl")" == 0 ]] || fail "the second push sent blob bytes"
for p in a b; do
  [[ "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$REG/team/mx:$p")" == \
     "sha256:$(manifest_digest "$TMP/out" $p)" ]] || fail "point $p is not under its ref name"
done
[[ "$(skopeo inspect --tls-verify=false --raw "docker://$REG/team/mx:all" | sha256sum | cut -d' ' -f1)" == \
   "$(manifest_digest "$TMP/out" mx-matrix)" ]] || fail "the index is not under 'all'"

pass
