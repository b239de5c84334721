#!/usr/bin/env bash
# Recipes that start `from:` a base image, against the real registry (distribution 2.8,
# plain HTTP on 127.0.0.1), checked with skopeo: the base's layers (and diff_ids and
# history) at the bottom, its config inherited and overridden; a Docker v2 base; an image
# index base (the recipe's architecture chosen); `from: oci:` layouts; a pinned digest
# that needs no registry once pulled; a wrong pin, a wrong architecture and a config
# field of the wrong type fail clearly;
# a changed base rebuilds the layers above; `lock` pins a tag's digest for `--locked`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo
start_registry base
R="127.0.0.1:$REG_PORT"
W="$TMP/w"
mkdir -p "$W/base/files/bin" "$W/app/files"

# The base: two copy layers and a config the app inherits.
make_base() {  # make_base CONTENT ARCH... : builds $W/base/layout with one image per ARCH
  echo "base release" >"$W/base/files/os-release"
  rm -rf "$W/base/layout"
  local arch
  for arch in "${@:2}"; do
    echo "$1 for $arch" >"$W/base/files/bin/tool"  # each architecture's layer differs
    cat >"$W/base/recipe-$arch.yaml" <<YAML
stack: base
architecture: $arch
source_date_epoch: 1000
layers:
  - {name: etc, copy: [{src: files/os-release, dst: /etc/os-release}]}
  - {name: bin, copy: [{src: files/bin/, dst: /base/bin/}]}
config:
  env: {PATH: "/base/bin:/usr/bin", FOO: base, KEEP: kept}
  entrypoint: [/base/bin/tool]
  cmd: ["--base"]
  workdir: /base
  user: "1000"
  labels: {vendor: base, keep: "yes"}
tags: ["base:$arch"]
YAML
    expect_ok "base-$arch" sb build "$W/base/recipe-$arch.yaml" -o "$W/base/layout" --store "$STORE"
  done
}
make_base "tool v1" amd64
M1=$(manifest_digest "$W/base/layout" amd64)
expect_ok push-base sb push "$W/base/layout:amd64" "$R/base:1" --store "$STORE"

echo "app" >"$W/app/files/app.txt"
app_recipe() {  # app_recipe FILE FROM [ARCH]
  cat >"$1" <<YAML
stack: app
from: $2
architecture: ${3:-amd64}
source_date_epoch: 2000
layers:
  - {name: app, copy: [{src: files/app.txt, dst: /app/app.txt}]}
config:
  env: {FOO: app, BAR: new}
  cmd: ["--app"]
  labels: {vendor: app}
tags: ["app:1"]
YAML
}
# layer_list LAYOUT REF [N]: the image's (first N) layer digests, one a line.
layer_list() { json "$1/blobs/sha256/$(manifest_digest "$1" "$2")" '"\n".join(l["digest"] for l in j["layers"][:'"${3:-99}"'])'; }

check "from: a tag: the base's layers, then the recipe's; pushed, skopeo sees them all"
app_recipe "$W/app/tag.yaml" "$R/base:1"
expect_ok app sb build "$W/app/tag.yaml" -o "$W/app/out" --store "$STORE"
grep -q "base: $R/base@sha256:$M1" "$TMP/app.err" || { show_output app; fail "build does not report the base's digest"; }
expect_ok push-app sb push "$W/app/out:1" "$R/app:1" --store "$STORE"
skopeo inspect --tls-verify=false --raw "docker://$R/app:1" >"$TMP/app.manifest"
skopeo inspect --tls-verify=false --config "docker://$R/app:1" >"$TMP/app.config"
layer_list "$W/base/layout" amd64 >"$TMP/base.layers"
json "$TMP/app.manifest" '"\n".join(l["digest"] for l in j["layers"])' >"$TMP/app.layers"
[[ $(wc -l <"$TMP/app.layers") == 3 ]] || fail "the app has $(wc -l <"$TMP/app.layers") layers, not 2 + 1"
head -n 2 "$TMP/app.layers" | cmp -s - "$TMP/base.layers" || fail "the app's bottom layers are not the base's"
BASECFG="$W/base/layout/blobs/sha256/$(json "$W/base/layout/blobs/sha256/$M1" 'j["config"]["digest"].split(":")[1]')"
[[ "$(json "$TMP/app.config" 'j["rootfs"]["diff_ids"][:2]')" == "$(json "$BASECFG" 'j["rootfs"]["diff_ids"]')" ]] ||
  fail "the base's diff_ids are not kept"

check "the config is the base's, overridden by the recipe's"
c() { json "$TMP/app.config" "$1"; }
[[ "$(c 'j["config"]["Env"]')" == "['PATH=/base/bin:/usr/bin', 'FOO=app', 'KEEP=kept', 'BAR=new']" ]] ||
  fail "Env is $(c 'j["config"]["Env"]')"
[[ "$(c 'j["config"]["Entrypoint"]')" == "['/base/bin/tool']" ]] || fail "the base's entrypoint is lost"
[[ "$(c 'j["config"]["Cmd"]')" == "['--app']" ]] || fail "the recipe's cmd does not win"
[[ "$(c 'j["config"]["WorkingDir"]')" == "/base" && "$(c 'j["config"]["User"]')" == "1000" ]] ||
  fail "workdir/user not inherited"
[[ "$(c 'sorted(j["config"]["Labels"].items())')" == "[('keep', 'yes'), ('vendor', 'app')]" ]] ||
  fail "labels: $(c 'j["config"]["Labels"]')"
[[ "$(c 'len(j["history"])')" == 3 && "$(c 'j["history"][0]["created"]')" == "1970-01-01T00:16:40Z" &&
   "$(c 'j["history"][2]["created"]')" == "1970-01-01T00:33:20Z" ]] ||
  fail "the base's history (with its times) is not kept below the app's: $(c 'j["history"]')"

check "from: oci:LAYOUT:REF (relative to the recipe) gives the same image"
app_recipe "$W/app/oci.yaml" "oci:../base/layout:amd64"
expect_ok app-oci sb build "$W/app/oci.yaml" -o "$W/app/out-oci" --store "$TMP/store-oci"
[[ "$(manifest_digest "$W/app/out-oci" 1)" == "$(manifest_digest "$W/app/out" 1)" ]] ||
  fail "the image from the layout differs from the one from the registry"

check "from: REPO@DIGEST: the same image; a second build is cached and asks the registry nothing"
app_recipe "$W/app/pinned.yaml" "$R/base@sha256:$M1"
expect_ok app-pin sb build "$W/app/pinned.yaml" -o "$W/app/out-pin" --store "$STORE"
[[ "$(manifest_digest "$W/app/out-pin" 1)" == "$(manifest_digest "$W/app/out" 1)" ]] || fail "pinned build differs"
grep -q "1 from the cache" "$TMP/app-pin.err" || { show_output app-pin; fail "the layer above the same base was rebuilt"; }
start_proxy "$REG_PORT" "$TMP/pinned.jsonl" --rate 0
app_recipe "$W/app/pinned2.yaml" "127.0.0.1:$PROXY_PORT/base@sha256:$M1"
expect_ok app-pin2 sb build "$W/app/pinned2.yaml" -o "$W/app/out-pin2" --store "$STORE"
[[ ! -s "$TMP/pinned.jsonl" ]] || fail "a pinned base already in the store went to the registry: $(cat "$TMP/pinned.jsonl")"

check "a wrong digest pin fails clearly, at the recipe's from: line"
app_recipe "$W/app/wrong.yaml" "$R/base@sha256:$(printf '0%.0s' {1..64})"
expect_rc 1 wrong sb build "$W/app/wrong.yaml" -o "$W/app/out-wrong" --store "$STORE"
grep -q "pull from $R/base: 404 manifest unknown" "$TMP/wrong.err" && grep -q "wrong.yaml:2:" "$TMP/wrong.err" ||
  { show_output wrong; fail "no clear error for a wrong pin"; }
[[ ! -e "$W/app/out-wrong" ]] || fail "a failed build left an output"
app_recipe "$W/app/wrong-oci.yaml" "oci:../base/layout@sha256:$(printf '1%.0s' {1..64})"
expect_rc 3 wrong-oci sb build "$W/app/wrong-oci.yaml" -o "$W/app/out-wrong" --store "$STORE"
grep -q "has no image sha256:1111" "$TMP/wrong-oci.err" || { show_output wrong-oci; fail "no clear error for a wrong layout pin"; }

check "a base for another architecture: a clear error"
app_recipe "$W/app/arm.yaml" "$R/base:1" arm64
expect_rc 1 arm sb build "$W/app/arm.yaml" -o "$W/app/out-arm" --store "$STORE"
grep -q "is for linux/amd64, and the recipe builds linux/arm64" "$TMP/arm.err" || { show_output arm; fail "no arch error"; }

check "a base whose config has a field of the wrong type: refused naming it"
python3 - "$W/bad-base" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
os.makedirs(d + "/blobs/sha256")
def put(b):
    h = hashlib.sha256(b).hexdigest()
    open(d + "/blobs/sha256/" + h, "wb").write(b)
    return {"digest": "sha256:" + h, "size": len(b)}
config = put(b'{"architecture":"amd64","os":"linux","config":{"Env":"PATH=/bin"},"rootfs":{"type":"layers","diff_ids":[]}}')
manifest = put(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
                           "layers": []}).encode())
open(d + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
json.dump({"schemaVersion": 2, "manifests": [dict(manifest, mediaType="application/vnd.oci.image.manifest.v1+json",
                                                  annotations={"org.opencontainers.image.ref.name": "1"})]},
          open(d + "/index.json", "w"))
PY
app_recipe "$W/app/bad-config.yaml" "oci:../bad-base:1"
expect_rc 1 bad-config sb build "$W/app/bad-config.yaml" -o "$W/app/out-bad" --store "$STORE"
grep -q "its config: config.Env is a string, not a list of strings" "$TMP/bad-config.err" ||
  { show_output bad-config; fail "no clear error for a base config with Env a string"; }
[[ ! -e "$W/app/out-bad" ]] || fail "a failed build left an output"

check "a Docker v2 base (skopeo --format v2s2): its layers under OCI media types"
skopeo copy -q --dest-tls-verify=false --format v2s2 "oci:$W/base/layout:amd64" "docker://$R/docker-base:1" >/dev/null
[[ "$(skopeo inspect --tls-verify=false --raw "docker://$R/docker-base:1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["mediaType"])')" == \
   "application/vnd.docker.distribution.manifest.v2+json" ]] || fail "skopeo did not write a Docker v2 manifest"
app_recipe "$W/app/docker.yaml" "$R/docker-base:1"
expect_ok app-docker sb build "$W/app/docker.yaml" -o "$W/app/out-docker" --store "$STORE"
[[ "$(json "$W/app/out-docker/blobs/sha256/$(manifest_digest "$W/app/out-docker" 1)" 'sorted({l["mediaType"] for l in j["layers"]})')" == \
   "['application/vnd.oci.image.layer.v1.tar+gzip']" ]] || fail "Docker layer media types leaked into the OCI manifest"
skopeo inspect "oci:$W/app/out-docker:1" >/dev/null || fail "skopeo cannot read the image on a Docker v2 base"

check "an index base: the recipe's architecture picks the image"
make_base "tool v1" amd64 arm64
expect_ok push-multi sb push "$W/base/layout" "$R/multi:all" --store "$STORE"
for arch in amd64 arm64; do
  app_recipe "$W/app/multi-$arch.yaml" "$R/multi:all" "$arch"
  expect_ok "multi-$arch" sb build "$W/app/multi-$arch.yaml" -o "$W/app/out-multi-$arch" --store "$STORE"
  layer_list "$W/base/layout" "$arch" >"$TMP/want.layers"
  layer_list "$W/app/out-multi-$arch" 1 2 | cmp -s - "$TMP/want.layers" || fail "$arch: not the $arch base's layers"
  [[ "$(json "$W/app/out-multi-$arch/blobs/sha256/$(json "$W/app/out-multi-$arch/blobs/sha256/$(manifest_digest "$W/app/out-multi-$arch" 1)" 'j["config"]["digest"].split(":")[1]')" 'j["architecture"]')" == "$arch" ]] ||
    fail "$arch: wrong architecture in the config"
done

check "lock pins the tag's digest; a changed base rebuilds the layers above; --locked keeps the pinned base"
expect_ok lock sb lock "$W/app/tag.yaml" --store "$STORE"
[[ "$(json "$W/app/tag.yaml.lock" 'j["points"][0]["base"]["digest"]')" == "sha256:$M1" ]] ||
  { cat "$W/app/tag.yaml.lock" >&2; fail "the lockfile does not pin the base's digest"; }
make_base "tool v2" amd64
M2=$(manifest_digest "$W/base/layout" amd64)
[[ "$M2" != "$M1" ]] || fail "the new base has the old digest"
expect_ok push-base2 sb push "$W/base/layout:amd64" "$R/base:1" --store "$STORE"
expect_ok app2 sb build "$W/app/tag.yaml" -o "$W/app/out2" --store "$STORE"
grep -q "1 built, 0 from the cache" "$TMP/app2.err" || { show_output app2; fail "the layer above a changed base was not rebuilt"; }
layer_list "$W/base/layout" amd64 >"$TMP/base2.layers"
layer_list "$W/app/out2" 1 2 | cmp -s - "$TMP/base2.layers" || fail "the rebuild is not on the new base"
expect_ok locked sb build "$W/app/tag.yaml" --locked -o "$W/app/out-locked" --store "$STORE"
[[ "$(manifest_digest "$W/app/out-locked" 1)" == "$(manifest_digest "$W/app/out" 1)" ]] ||
  fail "--locked did not build from the pinned base"
cp "$W/app/tag.yaml.lock" "$TMP/tag.lock.good"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["points"][0]["base"]["digest"]="sha256:zz"; json.dump(j,open(sys.argv[1],"w"))' \
  "$W/app/tag.yaml.lock"
expect_rc 3 badbase sb build "$W/app/tag.yaml" --locked -o "$W/app/out-badbase" --store "$STORE"
grep -q "pins a malformed base image for point .*: bad digest 'sha256:zz'" "$TMP/badbase.err" ||
  { show_output badbase; fail "no clear error for a malformed base digest in the lockfile"; }
[[ ! -e $W/app/out-badbase ]] || fail "a layout was written"
cp "$TMP/tag.lock.good" "$W/app/tag.yaml.lock"
app_recipe "$W/app/tag.yaml" "$R/docker-base:1"
expect_rc 3 stale sb build "$W/app/tag.yaml" --locked -o "$W/app/out-stale" --store "$STORE"
grep -q "the recipe's base image is $R/docker-base:1, and the lockfile pins $R/base:1" "$TMP/stale.err" ||
  { show_output stale; fail "no clear error for a from: that changed since the lock"; }
pass
