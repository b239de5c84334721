#!/usr/bin/env bash
# Layer annotations from a registry (DESIGN.md, "Trust boundary"): a base image's
# layer descriptors in a registry carry what its pusher wrote there, and stackbuild
# keeps of them only what it reads itself, the chunked formats' tables of contents
# (estargz, zstd:chunked), each value in its format's syntax. Against the real
# registry (distribution 2.8): a base whose manifest was rewritten to give its
# layer an unknown annotation, a TOC digest that is no digest and a size that is
# no number; an image built `from:` it carries
# none of them on the base's layer.
# A well-formed eStargz base keeps its two annotations.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=registry/lib.sh
source "$HERE/registry/lib.sh"
require_registry
start_registry ann
R="127.0.0.1:$REG_PORT"
cd "$TMP"

mkdir -p base/files app
echo "base" >base/files/os-release
cat >base/recipe.yaml <<'YAML'
stack: base
source_date_epoch: 1000
layers:
  - {name: etc, copy: [{src: files/os-release, dst: /etc/os-release}]}
tags: ["base:1"]
YAML
expect_ok base sb build base/recipe.yaml -o base/layout --store "$STORE" --compression estargz
expect_ok push sb push base/layout:1 "$R/base:good" --store "$STORE"

# The manifest as the registry has it, its layer's annotations rewritten, put back
# under another tag (the blobs are there already).
python3 - "$R" <<'PY'
import json, sys, urllib.request
reg = sys.argv[1]
accept = "application/vnd.oci.image.manifest.v1+json"
req = urllib.request.Request(f"http://{reg}/v2/base/manifests/good", headers={"Accept": accept})
m = json.load(urllib.request.urlopen(req))
m["layers"][0]["annotations"] = {
    "org.example.injected": "from the registry",
    "containerd.io/snapshot/stargz/toc.digest": "not-a-digest",
    "io.containers.estargz.uncompressed-size": "12 bytes",
}
body = json.dumps(m).encode()
put = urllib.request.Request(f"http://{reg}/v2/base/manifests/hostile", data=body, method="PUT",
                             headers={"Content-Type": accept})
urllib.request.urlopen(put).read()
PY

app() {  # app TAG: a recipe from the base under TAG
  cat >"app/$1.yaml" <<YAML
stack: app
from: $R/base:$1
source_date_epoch: 1000
layers:
  - {name: app, copy: [{src: $TMP/base/files/os-release, dst: /app/os-release}]}
tags: ["app:$1"]
YAML
}
# The first layer's annotations of the image under ref 1 in a layout, as JSON.
base_layer_annotations() {
  python3 - "$1" <<'PY'
import json, sys
d = sys.argv[1]
idx = json.load(open(f"{d}/index.json"))
m = [x for x in idx["manifests"] if x.get("annotations", {}).get("org.opencontainers.image.ref.name") == "1"][0]
man = json.load(open(f"{d}/blobs/sha256/{m['digest'].split(':')[1]}"))
print(json.dumps(man["layers"][0].get("annotations", {}), sort_keys=True))
PY
}

check "a well-formed eStargz base keeps its two annotations on the built image"
app good
expect_ok app-good sb build app/good.yaml -o good --store "$STORE" --tag app:1 --allow-host-paths
good=$(base_layer_annotations good)
python3 -c 'import json,sys; a=json.loads(sys.argv[1]); assert set(a) == {"containerd.io/snapshot/stargz/toc.digest", "io.containers.estargz.uncompressed-size"}, a' "$good" ||
  fail "the good base's annotations: $good"

check "a base whose layer descriptor carries foreign or malformed annotations: none reaches the image"
app hostile
expect_ok app-hostile sb build app/hostile.yaml -o hostile --store "$STORE" --tag app:1 --allow-host-paths
got=$(base_layer_annotations hostile)
[[ $got == "{}" ]] || fail "the built image carries the registry's annotations: $got"

pass
