#!/usr/bin/env bash
# `build` over a whole matrix (a local copy-only recipe whose matrix is a recipe
# variable): every point is built into one OCI layout, a layer the points share is
# built once (same digest in every image), the matrix index lists every point with
# its annotations and skopeo reads it, --only builds a subset, a rebuild is all
# cached, --jobs 1 and 2 give the same bytes, a failure names the point and layer
# and writes nothing, and the summary table and --json events are there.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

R="$TMP/recipe"
mkdir -p "$R"
echo "shared by every point" >"$R/common.txt"
for f in a b c; do echo "flavor $f" >"$R/$f.txt"; done
cat >"$R/mx.yaml" <<'YAML'
stack: mx
source_date_epoch: 1700000000
matrix:
  flavor: [a, b, c]
layers:
  - {name: base, copy: [{src: common.txt, dst: /etc/common.txt}]}
  - {name: flavor, copy: [{src: "${flavor}.txt", dst: "/opt/${flavor}/flavor.txt"}]}
config:
  env: {FLAVOR: "${flavor}"}
tags: ["mx:${flavor}"]
YAML

# refs LAYOUT: the layout's ref names, sorted, one line.
refs() { json "$1/index.json" '" ".join(sorted(m["annotations"]["org.opencontainers.image.ref.name"] for m in j["manifests"]))'; }
# matrix_index LAYOUT: the path of the matrix index blob (ref mx-matrix).
matrix_index() { echo "$1/blobs/sha256/$(manifest_digest "$1" mx-matrix)"; }

check "build with no --set/--only builds every point into one layout, with the matrix index"
expect_ok b1 sb build "$R/mx.yaml" -o "$TMP/out1" --store "$TMP/s1" -j 1
[[ "$(refs "$TMP/out1")" == "a b c mx-matrix" ]] || fail "refs in the layout: $(refs "$TMP/out1")"
grep -q "building 3 matrix points, 1 at a time" "$TMP/b1.err" || { show_output b1; fail "no matrix announcement"; }

check "the shared layer is built once: point a builds 2 layers, b and c take base from the cache"
grep -q "^mx:a (flavor=a): layers: 2 (2 built, 0 from the cache)" "$TMP/b1.err" || { show_output b1; fail "a"; }
grep -q "^mx:b (flavor=b): layers: 2 (1 built, 1 from the cache)" "$TMP/b1.err" || { show_output b1; fail "b"; }
grep -q "^mx:c (flavor=c): layers: 2 (1 built, 1 from the cache)" "$TMP/b1.err" || { show_output b1; fail "c"; }
la=$(image_digests "$TMP/out1" a | grep '^layer0 ')
for p in b c; do
  [[ "$(image_digests "$TMP/out1" $p | grep '^layer0 ')" == "$la" ]] || fail "point $p has another base layer"
done
[[ "$(image_digests "$TMP/out1" a | grep '^layer1 ')" != "$(image_digests "$TMP/out1" b | grep '^layer1 ')" ]] ||
  fail "the per-point layers are the same"
n=$(find "$TMP/out1/blobs/sha256" -type f | wc -l)
[[ "$n" == 11 ]] || fail "the layout holds $n blobs, expected 11 (4 layers, 3 configs, 3 manifests, 1 index)"
verify_blobs "$TMP/out1"

check "the matrix index lists every point's manifest with its tag and matrix values"
python3 - "$TMP/out1" "$(matrix_index "$TMP/out1")" <<'PY' || fail "the matrix index is wrong"
import json, sys
layout, idx = sys.argv[1], json.load(open(sys.argv[2]))
refs = {m["annotations"]["org.opencontainers.image.ref.name"]: m["digest"] for m in json.load(open(layout + "/index.json"))["manifests"]}
assert idx["mediaType"] == "application/vnd.oci.image.index.v1+json", idx
assert idx["annotations"]["dev.stackbuild.stack"] == "mx", idx
ms = idx["manifests"]
assert [m["annotations"]["dev.stackbuild.point"] for m in ms] == ["flavor=a", "flavor=b", "flavor=c"], ms
for m, f in zip(ms, "abc"):
    assert m["digest"] == refs[f], (m, refs)
    assert m["annotations"]["dev.stackbuild.tags"] == "mx:" + f, m
    assert m["annotations"]["dev.stackbuild.matrix.flavor"] == f, m
    assert m["platform"] == {"os": "linux", "architecture": "amd64"}, m
    env = json.load(open(layout + "/blobs/sha256/" + json.load(open(layout + "/blobs/sha256/" + m["digest"][7:]))["config"]["digest"][7:]))["config"]["Env"]
    assert "FLAVOR=" + f in env, env
PY
if [[ -f "$SCHEMAS/image-index-schema.json" ]] && python3 -c "import jsonschema" 2>/dev/null; then
  # The layout, the nested matrix index and every document it reaches, against the schemas.
  expect_ok validate python3 "$HERE/validate_oci.py" "$SCHEMAS" "$TMP/out1"
else
  say "the OCI schemas or python3-jsonschema are missing: the schema check is skipped"
fi
if command -v skopeo >/dev/null 2>&1; then
  for p in a c; do
    skopeo inspect --format '{{.Digest}}' "oci:$TMP/out1:$p" >/dev/null || fail "skopeo cannot read point $p"
  done
fi

check "the summary table lists every point with digest, size, layers and '-' for tests"
grep -q "^POINT  *TAG  *MANIFEST  *SIZE  *LAYERS  *TIME  *TESTS" "$TMP/b1.err" || { show_output b1; fail "no table"; }
for p in a b c; do
  d=$(manifest_digest "$TMP/out1" $p)
  grep -qE "^flavor=$p  +mx:$p  +sha256:${d:0:12} .* -\$" "$TMP/b1.err" || { show_output b1; fail "no row for $p"; }
done
grep -q "matrix index: mx-matrix sha256:$(manifest_digest "$TMP/out1" mx-matrix)" "$TMP/b1.err" ||
  { show_output b1; fail "the summary does not give the index"; }

check "a rebuild is all cached and gives the same layout"
expect_ok b2 sb build "$R/mx.yaml" -o "$TMP/out2" --store "$TMP/s1"
[[ "$(grep -c "layers: 2 (0 built, 2 from the cache)" "$TMP/b2.err")" == 3 ]] || { show_output b2; fail "not all cached"; }
cmp "$TMP/out1/index.json" "$TMP/out2/index.json" || fail "the rebuild wrote another index.json"

check "--jobs 2 in a fresh store gives byte-identical blobs and index.json"
expect_ok b3 sb build "$R/mx.yaml" -o "$TMP/out3" --store "$TMP/s3" --jobs 2 --threads 1
cmp "$TMP/out1/index.json" "$TMP/out3/index.json" || fail "--jobs 2 gave another index.json"
diff <(cd "$TMP/out1/blobs/sha256" && ls) <(cd "$TMP/out3/blobs/sha256" && ls) || fail "--jobs 2 gave other blobs"
built=$(grep -oE "layers: 2 \([0-9] built" "$TMP/b3.err" | grep -oE "[0-9] built" | awk '{n += $1} END {print n}')
[[ "$built" == 4 ]] || { show_output b3; fail "--jobs 2 built $built layers, expected 4 (base once)"; }

check "--only builds a subset; the matrix stays (the index lists what was built)"
expect_ok b4 sb build "$R/mx.yaml" -o "$TMP/out4" --store "$TMP/s1" --only flavor=b --only flavor=c
[[ "$(refs "$TMP/out4")" == "b c mx-matrix" ]] || fail "--only flavor=b,c wrote: $(refs "$TMP/out4")"
[[ "$(json "$(matrix_index "$TMP/out4")" 'len(j["manifests"])')" == 2 ]] || fail "the subset index"
[[ "$(manifest_digest "$TMP/out4" b)" == "$(manifest_digest "$TMP/out1" b)" ]] || fail "--only changed point b"
expect_rc 2 b5 sb build "$R/mx.yaml" -o "$TMP/out5" --store "$TMP/s1" --only flavor=z
grep -q "flavor is one of: a, b, c" "$TMP/b5.err" || { show_output b5; fail "no list of values"; }
[[ ! -e "$TMP/out5" ]] || fail "a refused --only wrote output"

check "--json gives point and layer events and a summary"
"$SB" build "$R/mx.yaml" -o "$TMP/out6" --store "$TMP/s1" --json >"$TMP/b6.jsonl" 2>"$TMP/b6.err" ||
  fail "build --json: $(cat "$TMP/b6.err")"
python3 - "$TMP/b6.jsonl" <<'PY' || fail "the JSON events"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = [e["event"] for e in ev]
assert kinds.count("point_begin") == 3 and kinds.count("point_end") == 3, kinds
layers = [e for e in ev if e["event"] == "layer"]
assert len(layers) == 6 and all(e["state"] == "cached" for e in layers), layers
assert all(e["scope"].startswith("mx:") for e in layers), layers
s = [e for e in ev if e["event"] == "summary"][0]
assert [p["point"] for p in s["points"]] == ["flavor=a", "flavor=b", "flavor=c"], s
assert all(p["tests"] is None and p["layers_reused"] == 2 for p in s["points"]), s
assert s["index"]["ref"] == "mx-matrix", s
PY

check "an unsatisfiable point is reported and skipped; --strict builds nothing and exits 4"
cat >"$R/py.yaml" <<'YAML'
stack: py
matrix:
  python: ["3.12", "1.0"]
layers:
  - {name: base, copy: [{src: common.txt, dst: /etc/common.txt}]}
tags: ["py:${python}"]
YAML
expect_ok u1 sb build "$R/py.yaml" -o "$TMP/outu" --store "$TMP/s1"
grep -q "1 of 2 matrix points are unsatisfiable" "$TMP/u1.err" || { show_output u1; fail "not reported"; }
grep -q "they are skipped; building the other 1" "$TMP/u1.err" || { show_output u1; fail "not skipped"; }
[[ "$(refs "$TMP/outu")" == "3.12 py-matrix" ]] || fail "refs with a skipped point: $(refs "$TMP/outu")"
expect_rc 4 u2 sb build "$R/py.yaml" -o "$TMP/outu2" --store "$TMP/s1" --strict
grep -q -- "--strict: 1 of 2 matrix points are unsatisfiable" "$TMP/u2.err" || { show_output u2; fail "no --strict report"; }
[[ ! -e "$TMP/outu2" ]] || fail "--strict wrote output"
expect_rc 4 u3 sb build "$R/py.yaml" -o "$TMP/outu3" --store "$TMP/s1" --only python=1.0
[[ ! -e "$TMP/outu3" ]] || fail "a build of only unsatisfiable points wrote output"

check "a failing point names the point and layer, and nothing is written"
rm "$R/c.txt"
expect_rc 3 b7 sb build "$R/mx.yaml" -o "$TMP/out7" --store "$TMP/s1"
grep -q "copy source 'c.txt' does not exist" "$TMP/b7.err" || { show_output b7; fail "no cause"; }
grep -q "while building layer 'flavor'" "$TMP/b7.err" || { show_output b7; fail "the layer is not named"; }
grep -q "while building matrix point flavor=c" "$TMP/b7.err" || { show_output b7; fail "the point is not named"; }
grep -qE "^flavor=c  +mx:c  +FAILED" "$TMP/b7.err" || { show_output b7; fail "the summary does not mark c failed"; }
[[ ! -e "$TMP/out7" ]] || fail "a failed matrix build wrote output"
[[ -z "$(store_temps "$TMP/s1")" ]] || fail "temp files left in the store: $(store_temps "$TMP/s1")"

pass
