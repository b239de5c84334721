#!/usr/bin/env bash
# `keep_source:` on a `use:` layer installed from wheels (NGC's /opt/pytorch beside
# the torch wheels), with stand-ins for the framework: a local catalog (layers/ beside
# the recipe, also given as --catalog) whose component "torchy" has a record with
# `pip: [torchy==2.0]` (wheels served from tests/integration/pip_index.py's index on
# 127.0.0.1) and `sources: {git: file://... , ref: v2.0}` (a local git repository),
# and a record torchy 1.0 without a source. Two points (matrix axis `flavor`, a copy
# layer each below the wheels) use torchy 2.0:
#   - each image is [flavor, wheels, source]: the wheel layer has the wheels and no
#     source, the top layer only the tree at /opt/torchy (the tag's tree, patched, no
#     .git), and the wheel layer is the same blob as without keep_source;
#   - both points share one source layer (same digest; built once, then cached);
#   - the SBOM lists the kept tree (repository, ref, patch, path) as a source package,
#     and the release notes name it;
#   - a rebuild is all cached and gives the same index and manifests; a second store
#     builds the same digests, and so does a third one from a registry cache
#     (--cache-from), without the git repository;
#   - the layer's own `source:` overrides the catalog's; ${torchy} works in keep_source;
#   - a record without a source is an error at the keep_source key (file:line:col),
#     before anything is fetched; a source that cannot be fetched names the URL and
#     the layer; neither leaves an image.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=registry/lib.sh
source "$HERE/registry/lib.sh"
require_tool git
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
glibc=$(ldd --version | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')
[[ -n $glibc ]] || skip "cannot tell this machine's glibc version"

python3 "$HERE/pip_index.py" "$TMP/index" || fail "building the index"
serve_dir "$TMP/index"
STACKBUILD_PIP_INDEX_URL="$SERVED_URL/simple"
export STACKBUILD_PIP_INDEX_URL PIP_CONFIG_FILE=/dev/null

# The framework's source: a git repository with the release tagged v2.0 (and a later
# commit on the branch, which must not be what is kept).
gitc() { git -C "$1" -c user.name=t -c user.email=t@example.invalid "${@:2}"; }
src="$TMP/torchy-src"
mkdir -p "$src/csrc" "$src/tools"
printf 'version = "2.0"\n' >"$src/setup.py"
printf 'int main() { return 0; }\n' >"$src/csrc/main.c"
printf '#!/bin/sh\necho build\n' >"$src/tools/build.sh" && chmod 0775 "$src/tools/build.sh"
git init -q "$src" && gitc "$src" add -A && gitc "$src" commit -qm v2.0 && gitc "$src" tag v2.0
printf 'later\n' >"$src/LATER" && gitc "$src" add -A && gitc "$src" commit -qm later
other="$TMP/other-src"
mkdir -p "$other" && printf 'mirror\n' >"$other/MIRROR"
git init -q "$other" && gitc "$other" add -A && gitc "$other" commit -qm m && gitc "$other" tag v2.0

proj="$TMP/proj"
mkdir -p "$proj/layers" "$proj/files"
cat >"$proj/layers/torchy.yaml" <<EOF
component: torchy
description: a stand-in framework
versions:
  - version: "2.0"
    sources: {pip: ["torchy==2.0"], git: {url: "file://$src", ref: v2.0}}
  - version: "1.0"
    sources: {pip: ["torchy==1.0"]}
EOF
echo a >"$proj/files/a.txt"
echo b >"$proj/files/b.txt"
printf -- '--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-version = "2.0"\n+version = "2.0+patched"\n' >"$proj/fix.patch"

recipe() {  # recipe FILE TORCHY-VERSION [EXTRA-KEYS-OF-THE-TORCHY-LAYER]
  cat >"$proj/$1" <<EOF
stack: kept
source_date_epoch: 1700000000
platform: {python: "$py", glibc: "$glibc"}
matrix:
  flavor: [a, b]
layers:
  - {name: flavor, copy: [{src: "files/\${flavor}.txt", dst: /flavor.txt}]}
  - name: torchy
    use: torchy
    version: "$2"
    from: wheel
    ${3:-comment: wheels}
tags: ["kept:\${flavor}"]
pip_constraint: false  # the kept source's place is the top of the image (test_pip checks the constraint layer)
EOF
}
recipe keep.yaml 2.0 $'keep_source: /opt/torchy\n    patches: [fix.patch]'
recipe nokeep.yaml 2.0
build() {  # build NAME RECIPE OUT [STORE]
  expect_ok "$1" sb build "$proj/$2" -o "$TMP/$3" --store "${4:-$STORE}" --catalog "$proj/layers"
}
layer_list() {  # layer_list OUT REF INDEX: the paths in layer INDEX of image REF
  python3 - "$TMP/$1" "$2" "$3" <<'PY'
import json, sys, tarfile
d, ref, i = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = lambda dg: f"{d}/blobs/{dg.replace(':', '/')}"
idx = json.load(open(f"{d}/index.json"))
m = [m for m in idx["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == ref][0]
man = json.load(open(b(m["digest"])))
for n in sorted(tarfile.open(b(man["layers"][i]["digest"])).getnames()): print(n)
PY
}

check "the image is [flavor, wheels, source]; the source layer holds only the patched tree at /opt/torchy"
build keep keep.yaml out
for f in a b; do image_digests "$TMP/out" "$f" >"$TMP/$f.digests"; done
[[ $(grep -c '^layer' "$TMP/a.digests") == 3 ]] || fail "expected 3 layers: $(cat "$TMP/a.digests")"
layer_list out a 1 >"$TMP/wheels.list"
layer_list out a 2 >"$TMP/source.list"
grep -q "site-packages/torchy/__init__.py$" "$TMP/wheels.list" || fail "no torchy in the wheel layer: $(cat "$TMP/wheels.list")"
if grep -q '^opt' "$TMP/wheels.list"; then fail "the wheel layer holds the source: $(grep '^opt' "$TMP/wheels.list")"; fi
printf '%s\n' opt opt/torchy opt/torchy/csrc opt/torchy/csrc/main.c opt/torchy/setup.py opt/torchy/tools \
  opt/torchy/tools/build.sh >"$TMP/source.want"
diff "$TMP/source.want" "$TMP/source.list" || fail "the source layer lists other paths (above)"
expect_ok unpack sb unpack "$TMP/out:a" "$TMP/root-a" --store "$STORE"
[[ $(cat "$TMP/root-a/opt/torchy/setup.py") == 'version = "2.0+patched"' ]] ||
  fail "the kept tree is not v2.0 patched: $(cat "$TMP/root-a/opt/torchy/setup.py")"
[[ $(stat -c %a "$TMP/root-a/opt/torchy/tools/build.sh") == 755 ]] || fail "build.sh mode: $(stat -c %a "$TMP/root-a/opt/torchy/tools/build.sh")"
[[ $(cat "$TMP/root-a/flavor.txt") == a ]] || fail "the flavor layer is missing"
cfg=$(grep '^config ' "$TMP/a.digests" | cut -d: -f2)
json "$TMP/out/blobs/sha256/$cfg" "j['history'][-1]['created_by']" | grep -q "layer 'torchy' (source at /opt/torchy)" ||
  fail "history: $(json "$TMP/out/blobs/sha256/$cfg" "j['history']")"

check "the two points share the source layer: one digest, built once"
[[ $(grep '^layer2 ' "$TMP/a.digests") == $(grep '^layer2 ' "$TMP/b.digests") ]] ||
  fail "the source layers differ: $(grep '^layer2' "$TMP/a.digests" "$TMP/b.digests")"
[[ $(grep '^layer0 ' "$TMP/a.digests") != $(grep '^layer0 ' "$TMP/b.digests") ]] || fail "the flavor layers should differ"
[[ $(grep -c "layer torchy (source): cached" "$TMP/keep.err") == 1 ]] ||
  { show_output keep; fail "the second point did not reuse the first point's source layer"; }

check "the SBOM lists the kept tree: its repository and ref, its patch, where it is; not compiled into the image"
expect_ok sbom sb sbom "$TMP/out:a" --store "$STORE" -o "$TMP/kept.spdx.json"
tagged=$(git -C "$src" rev-parse "v2.0^{commit}")
python3 - "$TMP/kept.spdx.json" "file://$src" "$(sha256sum "$proj/fix.patch" | cut -d' ' -f1)" "$tagged" <<'PY' ||
import hashlib, json, sys
doc, url, patch, commit = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
src = [p for p in doc["packages"] if p.get("primaryPackagePurpose") == "SOURCE"]
assert len(src) == 1, src
p = src[0]
assert p["name"] == "torchy", p
assert p["versionInfo"] == "2.0+patches." + hashlib.sha256((patch + "\n").encode()).hexdigest()[:8], p
assert p["downloadLocation"] == "NOASSERTION", p  # file:// is no location SPDX knows; the purl has it
# the commit the tag named when it was fetched, not the tag
assert p["externalRefs"][0]["referenceLocator"].endswith("?vcs_url=git%2B" + url + "%40" + commit), p
assert "fix.patch (sha256:" + patch + ")" in p["comment"] and "kept in the image at /opt/torchy" in p["comment"], p
rels = {(r["relationshipType"], r["relatedSpdxElement"]) for r in doc["relationships"]}
assert ("CONTAINS", p["SPDXID"]) in rels and ("GENERATED_FROM", p["SPDXID"]) not in rels, rels
assert any(q["name"] == "torchy" and q["primaryPackagePurpose"] == "LIBRARY" for q in doc["packages"])  # the wheel
PY
  fail "the SBOM does not describe the kept source as expected"
expect_ok notes sb notes "$TMP/out" --store "$STORE"
grep -q "^- \*\*Source:\*\* torchy 2.0+patches.[0-9a-f]\{8\}, from git file://$src at $tagged, kept at \`/opt/torchy\`$" "$TMP/notes.out" ||
  { show_output notes; fail "the release notes do not name the kept source"; }
[[ $(grep -c '^- \*\*Source:' "$TMP/notes.out") == 2 ]] || fail "expected a Source line for each of the two images"

check "the wheel layer is the same blob as without keep_source"
build nokeep nokeep.yaml out-nokeep
image_digests "$TMP/out-nokeep" a >"$TMP/nokeep.digests"
[[ $(grep -c '^layer' "$TMP/nokeep.digests") == 2 ]] || fail "without keep_source: $(cat "$TMP/nokeep.digests")"
[[ $(grep '^layer1 ' "$TMP/nokeep.digests") == $(grep '^layer1 ' "$TMP/a.digests") ]] ||
  fail "the wheel layer differs with keep_source"

check "a rebuild is all cached and identical; another store builds the same digests"
build again keep.yaml out
grep -q 'layers: 3 (0 built, 3 from the cache)' "$TMP/again.err" || { show_output again; fail "the rebuild was not all cached"; }
for f in a b; do
  image_digests "$TMP/out" "$f" | diff "$TMP/$f.digests" - || fail "kept:$f changed on a rebuild"
done
build fresh keep.yaml out-fresh "$TMP/store2"
image_digests "$TMP/out-fresh" b | diff "$TMP/b.digests" - || fail "another store built other digests"

if command -v docker-registry >/dev/null && command -v openssl >/dev/null && command -v curl >/dev/null; then
  check "--cache-to a registry; a new store --cache-from it takes the source layer from there, not from git"
  start_registry plain
  expect_ok cacheto sb build "$proj/keep.yaml" -o "$TMP/out-ct" --store "$STORE" --catalog "$proj/layers" \
    --cache-to "127.0.0.1:$REG_PORT/kept/cache"
  mv "$src" "$src.away"  # a fetch would fail now
  expect_ok cachefrom sb build "$proj/keep.yaml" -o "$TMP/out-cf" --store "$TMP/store-cf" --catalog "$proj/layers" \
    --cache-from "127.0.0.1:$REG_PORT/kept/cache"
  mv "$src.away" "$src"
  grep -q "layer torchy (source): cached sha256:.* (from the cache " "$TMP/cachefrom.err" ||
    { show_output cachefrom; fail "the source layer did not come from the registry cache"; }
  for f in a b; do
    image_digests "$TMP/out-cf" "$f" | diff "$TMP/$f.digests" - || fail "kept:$f from the cache differs (its label?)"
  done
else
  say "note: no docker-registry, openssl or curl: the registry cache check is left out"
fi

check "lock pins the tag's commit; after the tag moves, --locked in a new store builds the pinned commit"
expect_ok lock sb lock "$proj/keep.yaml" --catalog "$proj/layers" --store "$STORE"
want=$(git -C "$src" rev-parse "v2.0^{commit}")
patch_sum=$(sha256sum "$proj/fix.patch" | cut -d' ' -f1)
python3 - "$proj/keep.yaml.lock" "$want" "file://$src" "$patch_sum" <<'PY' || fail "the lockfile does not pin the source: $(cat "$proj/keep.yaml.lock")"
import json, sys
lock, want, url, patch = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
for p in lock["points"]:
    assert p["source"] == {"torchy": {"git": url, "ref": "v2.0", "commit": want,
                                      "patches": [{"path": "fix.patch", "sha256": patch}]}}, p.get("source")
PY
gitc "$src" tag -f v2.0 HEAD >/dev/null   # the tag now names the later commit (it adds LATER)
expect_ok locked sb build "$proj/keep.yaml" --locked -o "$TMP/out-locked" --store "$TMP/store-locked" --catalog "$proj/layers"
image_digests "$TMP/out-locked" a | diff "$TMP/a.digests" - || fail "the locked build of the moved tag differs"
grep -q "locked: $want" "$TMP/locked.err" || { show_output locked; fail "the build does not say it fetched the pinned commit"; }
python3 - "$proj/keep.yaml.lock" <<'PY'
import json, sys
lock = json.load(open(sys.argv[1]))
for p in lock["points"]:
    del p["source"]
json.dump(lock, open(sys.argv[1], "w"), indent=2)
PY
expect_rc 3 unpinned sb build "$proj/keep.yaml" --locked -o "$TMP/out-unpinned" --store "$TMP/store-locked" --catalog "$proj/layers"
grep -q "layer 'torchy' (.*): the lockfile pins no commit for its git source" "$TMP/unpinned.err" ||
  { show_output unpinned; fail "a lockfile without the source pin was not refused clearly"; }
gitc "$src" tag -f v2.0 "$want" >/dev/null

check "--locked refuses a patch changed since the lock, naming the patch and both sha256"
expect_ok relock sb lock "$proj/keep.yaml" --catalog "$proj/layers" --store "$STORE"
cp "$proj/fix.patch" "$TMP/fix.patch.orig"
sed -i 's/2.0+patched/2.0+patched-again/' "$proj/fix.patch"
new_sum=$(sha256sum "$proj/fix.patch" | cut -d' ' -f1)
expect_rc 3 patched sb build "$proj/keep.yaml" --locked -o "$TMP/out-patched" --store "$TMP/store-locked" --catalog "$proj/layers"
grep -q "layer 'torchy' (.*): patch 'fix.patch' changed since it was locked (sha256 $patch_sum, now $new_sum)" \
  "$TMP/patched.err" || { show_output patched; fail "a changed patch was not refused clearly"; }
[[ ! -e "$TMP/out-patched" ]] || fail "a refused build left an image"
cp "$TMP/fix.patch.orig" "$proj/fix.patch"
rm -f "$proj/keep.yaml.lock"

check "the layer's own source: overrides the catalog's; \${torchy} works in keep_source"
recipe own.yaml 2.0 $'keep_source: "/opt/torchy-${torchy}"\n    source: {git: "file://'"$other"$'", ref: "v${torchy}"}'
build own own.yaml out-own
layer_list out-own a 2 | grep -v '^opt$' >"$TMP/own.list"
printf '%s\n' opt/torchy-2.0 opt/torchy-2.0/MIRROR | diff - "$TMP/own.list" || fail "the own source is not what was kept"

check "a record without a source: an error at the keep_source key, nothing fetched, no image"
recipe nosrc.yaml 1.0 "keep_source: /opt/torchy"
expect_rc 3 nosrc sb build "$proj/nosrc.yaml" -o "$TMP/out-nosrc" --store "$TMP/store3" --catalog "$proj/layers"
grep -q "nosrc.yaml:12:5: .*layer 'torchy': 'keep_source': the catalog names no source (git, archive or debian) for torchy 1.0" \
  "$TMP/nosrc.err" || { show_output nosrc; fail "expected the error at nosrc.yaml:12:5"; }
[[ ! -e "$TMP/out-nosrc" ]] || fail "a failed build left an image"
python3 - "$TMP/store3" <<'PY' || fail "wheels were fetched before the error"
import os, sys
zips = [os.path.join(d, f) for d, _, fs in os.walk(sys.argv[1]) for f in fs
        if open(os.path.join(d, f), "rb").read(4) == b"PK\x03\x04"]
sys.exit(f"wheels in the store: {zips}" if zips else 0)
PY

check "a source that cannot be fetched names the URL and the layer"
recipe gone.yaml 2.0 $'keep_source: /opt/torchy\n    source: {git: "file://'"$TMP"$'/nowhere", ref: v2.0}'
expect_rc 1 gone sb build "$proj/gone.yaml" -o "$TMP/out-gone" --store "$STORE" --catalog "$proj/layers"
grep -q "file://$TMP/nowhere" "$TMP/gone.err" || { show_output gone; fail "the error does not name the URL"; }
grep -q "layer 'torchy'" "$TMP/gone.err" || { show_output gone; fail "the error does not name the layer"; }
[[ ! -e "$TMP/out-gone" ]] || fail "a failed build left an image"
pass
