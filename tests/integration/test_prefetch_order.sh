#!/usr/bin/env bash
# eStargz prefetch orders (docs/partial-pulls.md), from a recipe whose test
# reads two of a layer's files:
#   - built with --compression estargz and no order yet, each layer starts with
#     the no-prefetch landmark;
#   - `test LAYOUT:TAG --record-prefetch` records what the test opened (fanotify),
#     in order, and attaches it to the image in the layout: the two files, in the
#     order read, and no file it did not open;
#   - the next build puts them first in the data layer, each after its directory,
#     then .prefetch.landmark, the rest in byte order; a gzip reader still reads
#     the layer; the order goes along to the new image;
#   - a third build, with no test run between, gives the same digests (the order
#     kept), and a build from an empty layout the first build's (no hidden input);
#   - a prefetch order in the layout that names a path outside the image's
#     terms ('..') stops the build, naming the artifact.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool tar gzip python3
[[ $(id -u) == 0 ]] || skip "fanotify needs root"
cd "$TMP"

make_busybox_root base
mkdir -p data/data
for f in a b c d e f g h i j k l m n; do printf 'file %s\n' "$f" >"data/data/$f"; done
cat >app.yaml <<'EOF'
stack: app
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}], preserve_modes: true}
  - {name: data, copy: [{src: data/, dst: /}]}
tags: ["app:1"]
tests:
  - {name: reads, run: "cat /data/m /data/c >/dev/null"}
EOF

build() {  # $1: name, $2: layout
  expect_ok "$1" sb build app.yaml -o "$2" --store "$STORE" --compression estargz
}
# The entries of the image's layer N (0: base, 1: data) in stream order.
layer_names() {  # $1: layout, $2: N
  python3 - "$1" "$2" <<'PY' | tar -tzf - | grep -v '^stargz.index.json$'
import json, sys
layout, n = sys.argv[1], int(sys.argv[2])
index = json.load(open(f"{layout}/index.json"))
m = [d for d in index["manifests"] if d.get("annotations", {}).get("org.opencontainers.image.ref.name") == "1"][0]
blob = lambda d: f"{layout}/blobs/sha256/{d['digest'].split(':')[1]}"
manifest = json.load(open(blob(m)))
sys.stdout.buffer.write(open(blob(manifest["layers"][n]), "rb").read())
PY
}
image_digest() {
  python3 -c 'import json,sys; print([d["digest"] for d in json.load(open(sys.argv[1]+"/index.json"))["manifests"] if d.get("annotations",{}).get("org.opencontainers.image.ref.name")=="1"][0])' "$1"
}
# The prefetch order attached to the image of ref 1, as JSON, or nothing.
order_of() {
  python3 - "$1" <<'PY'
import json, sys
layout = sys.argv[1]
index = json.load(open(f"{layout}/index.json"))
blob = lambda d: f"{layout}/blobs/sha256/{d.split(':')[1]}"
image = [d["digest"] for d in index["manifests"] if d.get("annotations", {}).get("org.opencontainers.image.ref.name") == "1"][0]
for d in index["manifests"]:
    if d.get("artifactType") != "application/vnd.stackbuild.prefetch-order.v1+json":
        continue
    a = json.load(open(blob(d["digest"])))
    if a["subject"]["digest"] == image:
        print(open(blob(a["layers"][0]["digest"])).read().strip())
PY
}

check "without a recorded order, every eStargz layer starts with the no-prefetch landmark"
build first L
[[ $(layer_names L 1 | head -1) == .no.prefetch.landmark ]] || { layer_names L 1 | head -5; fail "no no-prefetch landmark first"; }
[[ -z $(order_of L) ]] || fail "an order before any was recorded"
first=$(image_digest L)

check "test --record-prefetch attaches what the test opened, in order"
expect_ok record sb test L:1 --store "$STORE" --record-prefetch
grep -q "prefetch order of L:1 (3 files)" "$TMP/record.err" || { show_output record; fail "no prefetch order result"; }
order_of L >order.json
python3 - order.json <<'PY' || { cat order.json; fail "the recorded order is wrong (above)"; }
import json, sys
paths = json.load(open(sys.argv[1]))["paths"]
assert "/data/m" in paths and "/data/c" in paths, paths
assert paths.index("/data/m") < paths.index("/data/c"), paths
assert not {"/data/a", "/data/n", "/etc/passwd"} & set(paths), paths
assert "/bin/busybox" in paths, paths  # the shell and cat, executed
PY

check "the next build puts them first, then the prefetch landmark, then the rest in order"
build second L
grep -q "put .* first, the prefetch order of L:1" "$TMP/second.err" || { show_output second; fail "the build did not say it took the order"; }
layer_names L 1 >names.txt
expected=$'data/\ndata/m\ndata/c\n.prefetch.landmark\ndata/a\ndata/b\ndata/d'
[[ $(head -7 names.txt) == "$expected" ]] || { cat names.txt; fail "the data layer's order is not the prefetch order's"; }
[[ $(layer_names L 0 | grep -n '^.prefetch.landmark$' | cut -d: -f1) -le 5 ]] || fail "busybox is not first in the base layer"
second=$(image_digest L)
[[ $second != "$first" ]] || fail "the image with the order has the digest of the one without"
[[ -n $(order_of L) ]] || fail "the order did not go along to the new image"

GOSRC=/usr/share/gocode/src/github.com
if command -v go >/dev/null && [[ -f $GOSRC/containerd/stargz-snapshotter/estargz/estargz.go ]]; then
  check "the estargz library finds the files before the prefetch landmark, and verifies the layer"
  cp -r "$SB_SOURCE_DIR/tests/tools/estargz-check" checker-src
  expect_ok go-build in_dir checker-src env GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$TMP/gocache" \
    GOFLAGS= GOPROXY=off go build -o "$TMP/estargz-check" .
  python3 - L <<'PY' >blob-and-toc
import json, sys
layout = sys.argv[1]
index = json.load(open(f"{layout}/index.json"))
blob = lambda d: f"{layout}/blobs/sha256/{d.split(':')[1]}"
m = [d for d in index["manifests"] if d.get("annotations", {}).get("org.opencontainers.image.ref.name") == "1"][0]
layer = json.load(open(blob(m["digest"])))["layers"][1]
print(blob(layer["digest"]), layer["annotations"]["containerd.io/snapshot/stargz/toc.digest"])
PY
  read -r blob toc <blob-and-toc
  expect_ok check-prefetch ./estargz-check -blob "$blob" -toc-digest "$toc" -tree "$TMP/data" -prefetch data/m,data/c
  grep -q "prefetch: 2 files before the landmark" check-prefetch.out || { show_output check-prefetch; fail "no prefetch check"; }
  expect_rc 1 check-not-prefetched ./estargz-check -blob "$blob" -toc-digest "$toc" -prefetch data/a
else
  say "no Go or estargz library: the library's check of the prefetch landmark is left out"
fi

check "a rebuild keeps the order without the tests; an empty layout gives the first build's image"
build third L
[[ $(image_digest L) == "$second" ]] || fail "the rebuild changed the image ($(image_digest L), was $second)"
build fresh L2
[[ $(image_digest L2) == "$first" ]] || fail "a build into an empty layout is not the first build's image"

if command -v docker-registry >/dev/null; then
  # shellcheck source-path=SCRIPTDIR source=registry/lib.sh
  source "$HERE/registry/lib.sh"
  start_registry reg
  R="127.0.0.1:$REG_PORT"
  check "--prefetch-from: a build into an empty layout takes the order from a layout, or pushed along to a registry"
  expect_ok fromlayout sb build app.yaml -o L3 --store "$STORE" --compression estargz --prefetch-from L
  [[ $(image_digest L3) == "$second" ]] || { show_output fromlayout; fail "--prefetch-from LAYOUT did not give the ordered image"; }
  expect_ok push sb push L:1 "$R/app:1" --store "$STORE"
  expect_ok fromreg sb build app.yaml -o L4 --store "$STORE" --compression estargz --prefetch-from "$R/app"
  [[ $(image_digest L4) == "$second" ]] || { show_output fromreg; fail "--prefetch-from REGISTRY/REPO did not give the ordered image"; }
  check "build --push-to sends the order along; a repository without one builds without it"
  expect_ok pushbuild sb build app.yaml -o L4 --store "$STORE" --compression estargz --push-to "$R/other:1"
  expect_ok fromother sb build app.yaml -o L5 --store "$STORE" --compression estargz --prefetch-from "$R/other"
  [[ $(image_digest L5) == "$second" ]] || { show_output fromother; fail "build --push-to did not send the order along"; }
  expect_ok fromnone sb build app.yaml -o L6 --store "$STORE" --compression estargz --prefetch-from "$R/none"
  [[ $(image_digest L6) == "$first" ]] || fail "an order came from a repository that has none"
  grep -q "prefetch-from: no order from" "$TMP/fromnone.err" || { show_output fromnone; fail "no word of the missing order"; }
  expect_rc 2 fromtag sb build app.yaml -o L6 --store "$STORE" --prefetch-from "$R/app:1"
else
  say "no docker-registry: --prefetch-from a registry is left out"
fi

check "a prefetch order that names '..' stops the build, naming it"
python3 - L <<'PY'
import hashlib, json, sys
layout = sys.argv[1]
index = json.load(open(f"{layout}/index.json"))
blob = lambda d: f"{layout}/blobs/sha256/{d.split(':')[1]}"
for d in index["manifests"]:
    if d.get("artifactType") == "application/vnd.stackbuild.prefetch-order.v1+json":
        a = json.load(open(blob(d["digest"])))
        doc = json.dumps({"paths": ["/data/../../etc/shadow"]}).encode()
        digest = "sha256:" + hashlib.sha256(doc).hexdigest()
        open(blob(digest), "wb").write(doc)
        a["layers"][0].update(digest=digest, size=len(doc))
        text = json.dumps(a).encode()
        md = "sha256:" + hashlib.sha256(text).hexdigest()
        open(blob(md), "wb").write(text)
        d.update(digest=md, size=len(text))
json.dump(index, open(f"{layout}/index.json", "w"))
PY
expect_rc 1 hostile sb build app.yaml -o L --store "$STORE" --compression estargz
grep -q "prefetch order .* paths\[0\] '/data/../../etc/shadow' is not normalised" "$TMP/hostile.err" ||
  { show_output hostile; fail "the error does not name the bad path"; }
pass
