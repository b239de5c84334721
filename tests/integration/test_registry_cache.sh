#!/usr/bin/env bash
# The build cache in a registry (build --cache-to, --cache-from, --cache; docs/cache.md),
# against the real registry (distribution 2.8, plain HTTP on 127.0.0.1) and a signed
# fixture apt repository. "Machines" are separate stores and separate copies of the
# recipe directory:
# - A builds a two-point matrix (apt, apt, copy layers split over a tiny budget) and
#   writes the cache: an OCI index of one artifact manifest per point;
# - B, with an empty store, builds every layer from the cache, with A's digests, and a
#   rebuild with nothing changed reaches no registry;
# - C changes the upper apt layer: the lower one comes from the cache with its dpkg
#   state, and --only writes one point back, keeping the other's;
# - a smaller matrix drops the points gone; a lying record costs a rebuild, not a wrong
#   image; a tag that holds an image is never overwritten; a missing or unreachable
#   cache is a warning; a digest is a usage error.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=apt_lib.sh
source "$HERE/apt_lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo gpg gpgv dpkg-deb gzip sha256sum

www="$TMP/www"
export GNUPGHOME="$TMP/gnupg"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
gpg --batch --passphrase '' --quick-gen-key 'Fixture <fixture@example.invalid>' ed25519 sign never 2>/dev/null ||
  fail "gpg could not make a key"
mkdeb main libgreet 1.0 "" usr/lib/libgreet.so.1
mkdeb main hello 1.0 "libgreet (>= 1.0)" usr/bin/hello
mkdeb main tool 1.0 "" usr/bin/tool
mkdeb main extra 1.0 "" usr/bin/extra
publish main inrelease
serve_dir "$www"
url="$SERVED_URL"

start_registry plain
REG="127.0.0.1:$REG_PORT"
start_proxy "$REG_PORT" "$TMP/proxy.jsonl" --rate 0
CACHE="127.0.0.1:$PROXY_PORT/team/cache"

# make_recipe DIR TOOLS FLAVORS: the recipe and its files in DIR.
make_recipe() {
  local d=$1
  mkdir -p "$d/opt"
  gpg --batch --export >"$d/key.gpg"
  head -c 3000 /dev/zero | tr '\0' 'x' >"$d/opt/big.txt"
  for f in a b; do echo "flavor $f" >"$d/$f.txt"; done
  cat >"$d/cc.yaml" <<YAML
stack: cc
source_date_epoch: 1700000000
layer_budget: 1KiB
repositories:
  - {url: "$url/main", suites: [test], keyring: key.gpg}
matrix:
  flavor: [$3]
layers:
  - {name: base, apt: [hello]}
  - {name: tools, apt: [$2]}
  - {name: files, copy: [{src: opt/big.txt, dst: /opt/big.txt}, {src: "\${flavor}.txt", dst: /etc/flavor.txt}]}
tags: ["cc:\${flavor}"]
YAML
}

# requests: how many requests the proxy passed on so far.
requests() { wc -l <"$TMP/proxy.jsonl"; }
# cache_index: the index under the cache's tag, as JSON on stdout.
cache_index() { skopeo inspect --tls-verify=false --raw "docker://$REG/team/cache:buildcache"; }

check "machine A builds both points and writes the cache: one manifest per point"
make_recipe "$TMP/a" tool "a, b"
expect_ok a1 sb build "$TMP/a/cc.yaml" -o "$TMP/out-a" --store "$TMP/store-a" --cache-to "$CACHE"
grep -q "cache to $CACHE:buildcache: 2 points written, 0 kept" "$TMP/a1.err" || { show_output a1; fail "no cache summary"; }
cache_index >"$TMP/index1.json" || fail "no cache under buildcache"
python3 - "$TMP/index1.json" <<'PY' || fail "the cache index is not as documented"
import json, sys
idx = json.load(open(sys.argv[1]))
assert idx["mediaType"] == "application/vnd.oci.image.index.v1+json", idx
assert idx["artifactType"] == "application/vnd.stackbuild.cache.v1", idx
ms = idx["manifests"]
assert [m["annotations"]["dev.stackbuild.point"] for m in ms] == ["flavor=a", "flavor=b"], ms
assert all(m["annotations"]["dev.stackbuild.stack"] == "cc" for m in ms), ms
assert all(m["artifactType"] == "application/vnd.stackbuild.cache.v1" for m in ms), ms
PY
m=$(json "$TMP/index1.json" 'j["manifests"][0]["digest"]')
skopeo inspect --tls-verify=false --raw "docker://$REG/team/cache@$m" >"$TMP/m1.json" || fail "no manifest $m"
python3 - "$TMP/m1.json" "$TMP/out-a" "$(manifest_digest "$TMP/out-a" a)" <<'PY' || fail "point a's cache manifest does not list its image's layers"
import json, sys
m = json.load(open(sys.argv[1]))
image = json.load(open(f"{sys.argv[2]}/blobs/sha256/{sys.argv[3]}"))
assert m["config"]["mediaType"] == "application/vnd.stackbuild.cache.config.v1+json", m
assert [l["digest"] for l in m["layers"]] == [l["digest"] for l in image["layers"]], (m["layers"], image["layers"])
PY
cfg=$(json "$TMP/m1.json" 'j["config"]["digest"]')
curl -sf "http://$REG/v2/team/cache/blobs/$cfg" >"$TMP/cfg1.json" || fail "no config blob $cfg"
python3 - "$TMP/cfg1.json" <<'PY' || fail "the records are not as documented"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["stackbuild_cache"] == 1 and c["stack"] == "cc" and c["point"] == "flavor=a", c
kinds = sorted({r["kind"] for e in c["entries"] for r in e["records"]})
assert kinds == ["apt-state"], kinds
assert any(len(e["layers"]) > 1 for e in c["entries"]), "no split layer in the cache"
PY

check "machine B (another directory, an empty store) takes every layer from the cache, with A's digests"
make_recipe "$TMP/b" tool "a, b"
expect_ok b1 sb build "$TMP/b/cc.yaml" -o "$TMP/out-b" --store "$TMP/store-b" --cache-from "$CACHE"
if grep -E "^(install|compress) |: (install|compress) layer" "$TMP/b1.err" "$TMP/b1.out"; then
  show_output b1
  fail "machine B built a layer"
fi
# Point a fetches base, tools and files; b shares base and tools with it and fetches its files.
n=$(grep -c "(from the cache $CACHE:buildcache)" "$TMP/b1.err" || true)
[[ $n == 4 ]] || { show_output b1; fail "expected 4 layers from the cache, got $n"; }
[[ $(grep -c "0 built, 3 reused" "$TMP/b1.err") == 2 ]] || { show_output b1; fail "a point built a layer"; }
for p in a b; do
  [[ "$(manifest_digest "$TMP/out-b" $p)" == "$(manifest_digest "$TMP/out-a" $p)" ]] ||
    fail "point $p: machine B's image differs from machine A's"
done
verify_blobs "$TMP/out-b"

check "a rebuild with nothing changed reaches no registry"
before=$(requests)
expect_ok b2 sb build "$TMP/b/cc.yaml" -o "$TMP/out-b" --store "$TMP/store-b" --cache "$CACHE" --no-verify
[[ "$(requests)" -gt "$before" ]] || fail "--cache wrote nothing back"
before=$(requests)
expect_ok b3 sb build "$TMP/b/cc.yaml" -o "$TMP/out-b" --store "$TMP/store-b" --cache-from "$CACHE"
[[ "$(requests)" == "$before" ]] || fail "a build that missed nothing asked the registry $(( $(requests) - before )) times"
cache_index >"$TMP/index2.json"
cmp -s "$TMP/index1.json" "$TMP/index2.json" || fail "writing the same layers back changed the cache index"

check "machine C changes the upper apt layer: the lower one comes from the cache with its dpkg state"
make_recipe "$TMP/c" "tool, extra" "a, b"
expect_ok c1 sb build "$TMP/c/cc.yaml" -o "$TMP/out-c" --store "$TMP/store-c" --cache-from "$CACHE" --only flavor=a
grep -q "layer base: cached .*(from the cache" "$TMP/c1.err" || { show_output c1; fail "layer base was not taken from the cache"; }
if grep -q "layer tools: cached" "$TMP/c1.err"; then show_output c1; fail "the changed layer tools came from the cache"; fi
expect_ok c1u sb unpack "$TMP/out-c:a" "$TMP/root-c" --store "$TMP/store-c"
got=$(dpkg-query --admindir="$TMP/root-c/var/lib/dpkg" -W -f '${Package} ' | tr ' ' '\n' | sort | xargs)
[[ "$got" == "extra hello libgreet tool" ]] || fail "dpkg's status in C's image lists '$got'"

check "--cache-to with --only writes that point and keeps the other's"
expect_ok c2 sb build "$TMP/c/cc.yaml" -o "$TMP/out-c" --store "$TMP/store-c" --cache-to "$CACHE" --only flavor=a
grep -q "1 point written, 1 kept" "$TMP/c2.err" || { show_output c2; fail "no '1 point written, 1 kept'"; }
cache_index >"$TMP/index3.json"
python3 - "$TMP/index1.json" "$TMP/index3.json" <<'PY' || fail "point b's cache was not kept as it was"
import json, sys
old, new = (json.load(open(f))["manifests"] for f in sys.argv[1:3])
assert old[1] == new[1], (old[1], new[1])
assert old[0]["digest"] != new[0]["digest"], "point a's cache did not change"
PY

check "a point gone from the matrix leaves the cache"
make_recipe "$TMP/d" "tool, extra" "a"
expect_ok d1 sb build "$TMP/d/cc.yaml" -o "$TMP/out-d" --store "$TMP/store-c" --cache-to "$CACHE"
grep -q "1 point written, 0 kept" "$TMP/d1.err" || { show_output d1; fail "point b was kept"; }
[[ "$(cache_index | json /dev/stdin 'len(j["manifests"])')" == 1 ]] || fail "the cache still lists point b"

check "another stack's points in the same cache are kept"
mkdir -p "$TMP/other"
echo other >"$TMP/other/o.txt"
printf 'stack: other\nlayers:\n  - {name: o, copy: [{src: o.txt, dst: /o.txt}]}\ntags: ["other:1"]\n' >"$TMP/other/o.yaml"
expect_ok o1 sb build "$TMP/other/o.yaml" -o "$TMP/out-o" --store "$TMP/store-c" --cache-to "$CACHE"
grep -q "1 point written, 1 kept" "$TMP/o1.err" || { show_output o1; fail "stack cc's point was not kept"; }

check "a record that lies about its layer costs a rebuild, not a wrong image"
# Point a's records with one diff_id changed, pushed as the whole cache of a new tag.
python3 - "$REG" "$TMP/cfg1.json" "$TMP/m1.json" <<'PY' || fail "could not write the damaged cache"
import hashlib, json, sys, urllib.request
reg, cfg, man = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
base = f"http://{reg}/v2/team/cache"
def put_blob(data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    r = urllib.request.urlopen(urllib.request.Request(base + "/blobs/uploads/", method="POST"))
    loc = r.headers["Location"]
    loc = (loc if loc.startswith("http") else f"http://{reg}{loc}") + ("&" if "?" in loc else "?") + "digest=" + d
    urllib.request.urlopen(urllib.request.Request(loc, data=data, method="PUT",
                           headers={"Content-Type": "application/octet-stream"}))
    return d, len(data)
def put_manifest(ref, doc, media_type):
    data = json.dumps(doc).encode()
    urllib.request.urlopen(urllib.request.Request(f"{base}/manifests/{ref}", data=data, method="PUT",
                           headers={"Content-Type": media_type}))
    return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
files = next(e for e in cfg["entries"] if len(e["layers"]) > 1)  # the split copy layer
files["layers"][0]["diff_id"] = "sha256:" + "0" * 64
d, n = put_blob(json.dumps(cfg).encode())
man["config"]["digest"], man["config"]["size"] = d, n
data = json.dumps(man).encode()
md = "sha256:" + hashlib.sha256(data).hexdigest()
put_manifest(md, man, man["mediaType"])
put_manifest("damaged", {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                         "artifactType": "application/vnd.stackbuild.cache.v1",
                         "manifests": [{"mediaType": man["mediaType"], "digest": md, "size": len(data),
                                        "artifactType": "application/vnd.stackbuild.cache.v1",
                                        "annotations": man["annotations"]}]},
             "application/vnd.oci.image.index.v1+json")
PY
expect_ok e1 sb build "$TMP/b/cc.yaml" -o "$TMP/out-e" --store "$TMP/store-e" --cache-from "$CACHE:damaged" --only flavor=a
grep -q "layer files: the cache $CACHE:damaged has it, but blob .* diff_id .*; building it here" "$TMP/e1.err" ||
  { show_output e1; fail "no warning about the lying record"; }
grep -q "layer base: cached .*(from the cache" "$TMP/e1.err" || { show_output e1; fail "the good layers were not used"; }
[[ "$(manifest_digest "$TMP/out-e" a)" == "$(manifest_digest "$TMP/out-a" a)" ]] || fail "the image differs from A's"

check "a tag that holds an image is never overwritten by a cache"
expect_ok i2 sb build "$TMP/other/o.yaml" -o "$TMP/out-o" --store "$TMP/store-c" --push-to "$REG/team/img:1" --no-verify
expect_rc 1 i3 sb build "$TMP/other/o.yaml" -o "$TMP/out-o" --store "$TMP/store-c" --cache-to "$REG/team/img:1"
grep -q "the tag 1 holds application/vnd.oci.image.manifest.v1+json sha256:.*, not a stackbuild cache" "$TMP/i3.err" ||
  { show_output i3; fail "no refusal naming the image"; }
[[ "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$REG/team/img:1")" == "sha256:$(manifest_digest "$TMP/out-o" 1)" ]] ||
  fail "the image under team/img:1 was replaced"

check "a missing or unreachable cache is a warning; a digest is a usage error"
expect_ok w1 sb build "$TMP/other/o.yaml" -o "$TMP/out-w" --store "$TMP/store-w" --cache-from "$REG/team/none:x"
grep -q "cache from $REG/team/none:x: there is no cache there yet" "$TMP/w1.err" || { show_output w1; fail "no note of the missing cache"; }
dead=$(free_port)
expect_ok w2 sb build "$TMP/other/o.yaml" -o "$TMP/out-w2" --store "$TMP/store-w2" --cache-from "127.0.0.1:$dead/team/cache"
grep -q "warning: cache from 127.0.0.1:$dead/team/cache:buildcache: .*; building without this cache" "$TMP/w2.err" ||
  { show_output w2; fail "no warning about the unreachable cache"; }
expect_rc 2 u1 sb build "$TMP/other/o.yaml" --store "$TMP/store-w" --cache-to "$REG/team/cache@sha256:$(printf '0%.0s' {1..64})"
grep -q "a cache is named by a tag, not by a digest" "$TMP/u1.err" || { show_output u1; fail "no usage error for a digest"; }
pass
