#!/usr/bin/env bash
# Layers built from a source tree (runs as root; skipped otherwise). On a static-busybox
# base, a layer with `source: {path: demo}`, a patch and `keep_source: /opt/demo`:
#   - the patched tree is in the image at /opt/demo, the steps ran there (their working
#     directory) and what they built is in the layer too;
#   - without keep_source the tree is not in the image (it was bound at /usr/src/<layer>),
#     what the steps built from it is;
#   - a git source (a local repository at a commit) and an archive source (file:// URL,
#     pinned by sha256) build the same image (but for the label naming the source);
#   - the SBOM names the tree each was compiled from (a source package: origin, patches,
#     GENERATED_FROM, and CONTAINS where kept);
#   - an unchanged rebuild comes from the cache; editing a source file or the patch
#     rebuilds that layer;
#   - a patch that does not apply, a wrong sha256, a keep_source path the layers below
#     already have fail the build with what went wrong and leave no image.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool git patch tar sha256sum
cd "$TMP"

make_busybox_root base
mkdir -p base/opt/taken
mkdir -p demo/src
printf 'greeting=hello\n' >demo/src/config
printf '#!/bin/sh\nset -e\npwd >built-in\nmkdir -p /usr/local\nsed "s/=/ is /" src/config >/usr/local/demo.out\n' >demo/build.sh
good_patch() { printf -- '--- a/src/config\n+++ b/src/config\n@@ -1 +1 @@\n-greeting=hello\n+greeting=%s\n' "$1" >greeting.patch; }
good_patch patched

recipe() {  # recipe FILE SOURCE-MAP [EXTRA-LAYER-KEY]
  cat >"$1" <<EOF
stack: src
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: demo
    source: $2
    patches: [greeting.patch]
    ${3:-comment: none}
    build:
      run: [sh build.sh]
tags: ["src:1"]
EOF
}
# top_layer OUT: the paths in the image's top layer.
top_layer() {
  python3 - "$1" <<'PY'
import json, sys, tarfile
d = sys.argv[1]; b = lambda dg: f"{d}/blobs/{dg.replace(':', '/')}"
m = json.load(open(b(json.load(open(f"{d}/index.json"))["manifests"][0]["digest"])))
for n in sorted(tarfile.open(b(m["layers"][-1]["digest"])).getnames()): print(n)
PY
}

check "keep_source: the patched tree stays at /opt/demo and the steps ran in it"
recipe keep.yaml "{path: demo}" "keep_source: /opt/demo"
expect_ok keep sb build keep.yaml -o out-keep --store "$STORE"
expect_ok unpack-keep sb unpack out-keep:1 r-keep --store "$STORE"
[[ $(cat r-keep/opt/demo/src/config) == "greeting=patched" ]] || fail "the kept source is not patched: $(cat r-keep/opt/demo/src/config)"
[[ $(cat r-keep/opt/demo/built-in) == "/opt/demo" ]] || fail "the steps ran in '$(cat r-keep/opt/demo/built-in)', not /opt/demo"
[[ $(cat r-keep/usr/local/demo.out) == "greeting is patched" ]] || fail "the step's output: $(cat r-keep/usr/local/demo.out)"
[[ -f r-keep/opt/demo/build.sh ]] || fail "build.sh is not in the kept source"

check "without keep_source the tree stays out of the layer"
recipe nokeep.yaml "{path: demo}"
expect_ok nokeep sb build nokeep.yaml -o out-nokeep --store "$STORE"
top_layer out-nokeep >nokeep.list
grep -qx 'usr/local/demo.out' nokeep.list || fail "the built file is not in the layer: $(cat nokeep.list)"
if grep -q 'usr/src\|opt/demo\|built-in' nokeep.list; then fail "the source entered the layer: $(cat nokeep.list)"; fi

check "git and archive sources give the same image as the local directory"
git -C demo init -q && git -C demo add -A &&
  git -C demo -c user.name=t -c user.email=t@example.invalid commit -qm demo
commit=$(git -C demo rev-parse HEAD)
recipe git.yaml "{git: file://$TMP/demo, ref: $commit}" "keep_source: /opt/demo"
expect_ok git sb build git.yaml -o out-git --store "$STORE"
tar -C demo --exclude=.git -czf demo.tar.gz .
sum=$(sha256sum demo.tar.gz | cut -d' ' -f1)
recipe archive.yaml "{url: file://$TMP/demo.tar.gz, sha256: $sum}" "keep_source: /opt/demo"
expect_ok archive sb build archive.yaml -o out-archive --store "$STORE"
rm -rf demo/.git
for o in out-git out-archive; do
  diff <(top_layer out-keep) <(top_layer "$o") || fail "$o: the top layer lists other paths"
  expect_ok "unpack-$o" sb unpack "$o:1" "r-$o" --store "$STORE"
  diff -r r-keep "r-$o" >/dev/null || fail "$o: the image differs from the local source's: $(diff -r r-keep "r-$o" | head -5)"
done

check "the SBOM names the tree each image was compiled from: its origin, and whether the image keeps it"
for o in out-nokeep out-git out-archive; do expect_ok "sbom-$o" sb sbom "$o:1" --store "$STORE" -o "$o.spdx.json"; done
python3 - "$TMP" "$commit" "$sum" <<'PY' || fail "the SBOMs do not describe the source trees as expected"
import json, sys
tmp, commit, archive_sum = sys.argv[1:]
def source_of(out):
    doc = json.load(open(f"{tmp}/{out}.spdx.json"))
    src = [p for p in doc["packages"] if p.get("primaryPackagePurpose") == "SOURCE"]
    assert len(src) == 1, (out, src)
    rels = {r["relationshipType"] for r in doc["relationships"] if r["relatedSpdxElement"] == src[0]["SPDXID"]}
    return src[0], rels
p, rels = source_of("out-nokeep")  # a local directory: no download location, not in the image
assert p["name"] == "demo" and p["downloadLocation"] == "NOASSERTION", p
assert p["versionInfo"].startswith("sha256:") and "+patches." in p["versionInfo"], p
assert rels == {"GENERATED_FROM"}, rels
assert tmp not in json.dumps(p), p  # no host path
p, rels = source_of("out-git")  # a file:// URL is no download location SPDX knows: the purl has it
assert p["downloadLocation"] == "NOASSERTION", p
purl = p["externalRefs"][0]["referenceLocator"]
assert purl.startswith("pkg:generic/demo@") and purl.endswith(f"?vcs_url=git%2Bfile://{tmp}/demo%40{commit}"), purl
assert p["versionInfo"].startswith(commit + "+patches."), p
assert rels == {"CONTAINS", "GENERATED_FROM"}, rels
p, rels = source_of("out-archive")
assert p["downloadLocation"] == "NOASSERTION", p
assert p["checksums"] == [{"algorithm": "SHA256", "checksumValue": archive_sum}], p
purl = p["externalRefs"][0]["referenceLocator"]
assert f"checksum=sha256:{archive_sum}&download_url=file://{tmp}/demo.tar.gz" in purl, purl
PY
expect_ok notes sb notes out-nokeep --store "$STORE"
grep -q '^- \*\*Source:\*\* demo sha256:[0-9a-f]\{12\}+patches.[0-9a-f]\{8\}, from a local directory (compiled into the image; not kept)$' notes.out ||
  { show_output notes; fail "the release notes do not name the tree the image was compiled from"; }

check "an unchanged rebuild is cached; editing the source or the patch rebuilds the layer"
expect_ok again sb build keep.yaml -o out-keep --store "$STORE"
grep -q 'layers: 2 (0 built, 2 from the cache)' again.err || { show_output again; fail "the rebuild was not all cached"; }
echo "extra" >demo/src/extra
expect_ok edited sb build keep.yaml -o out-keep --store "$STORE"
grep -q 'layers: 2 (1 built, 1 from the cache)' edited.err || { show_output edited; fail "an edited source did not rebuild the layer"; }
rm demo/src/extra
good_patch repatched
expect_ok repatched sb build keep.yaml -o out-keep --store "$STORE"
grep -q 'layers: 2 (1 built, 1 from the cache)' repatched.err || { show_output repatched; fail "an edited patch did not rebuild the layer"; }

check "a patch that does not apply fails the build and leaves no image"
printf -- '--- a/src/config\n+++ b/src/config\n@@ -1 +1 @@\n-nothing=here\n+greeting=x\n' >greeting.patch
expect_rc 1 badpatch sb build keep.yaml -o out-bad --store "$STORE"
grep -q 'patch -p1' badpatch.err || { show_output badpatch; fail "the error does not name the patch command"; }
[[ ! -e out-bad ]] || fail "a failed build left out-bad"
good_patch patched

check "a wrong sha256 fails before anything is built"
recipe badsum.yaml "{url: file://$TMP/demo.tar.gz, sha256: $(printf '0%.0s' {1..64})}" "keep_source: /opt/demo"
expect_rc 1 badsum sb build badsum.yaml -o out-bad --store "$STORE"
grep -qi 'sha256' badsum.err || { show_output badsum; fail "the error does not say the sha256 differs"; }
[[ ! -e out-bad ]] || fail "a failed build left out-bad"

check "lock records the tree and the patch; --locked refuses an edited tree, an edited patch and another archive"
expect_ok lock sb lock keep.yaml --store "$STORE"
python3 - keep.yaml.lock <<'PY' || fail "the lock does not record the source: $(cat keep.yaml.lock)"
import json, sys
src = json.load(open(sys.argv[1]))["points"][0]["source"]["demo"]
assert src["path"] == "demo" and src["tree"].startswith("sha256:"), src
assert [p["path"] for p in src["patches"]] == ["greeting.patch"] and len(src["patches"][0]["sha256"]) == 64, src
PY
expect_ok locked sb build keep.yaml --locked -o out-locked --store "$STORE"
echo "late edit" >>demo/src/config
expect_rc 3 locked-tree sb build keep.yaml --locked -o out-bad --store "$STORE"
grep -q "layer 'demo'.*the local directory demo changed since it was locked" locked-tree.err || { show_output locked-tree; fail "the refusal does not name the layer"; }
[[ ! -e out-bad ]] || fail "a refused locked build left out-bad"
sed -i '$d' demo/src/config
good_patch edited-after-lock
expect_rc 3 locked-patch sb build keep.yaml --locked -o out-bad --store "$STORE"
grep -q "greeting.patch" locked-patch.err || { show_output locked-patch; fail "the refusal does not name the patch"; }
good_patch patched
expect_ok locked-again sb build keep.yaml --locked -o out-locked --store "$STORE"
expect_ok lock-archive sb lock archive.yaml --store "$STORE"
cp demo.tar.gz demo2.tar.gz && printf 'x' >>demo2.tar.gz
recipe archive.yaml "{url: file://$TMP/demo2.tar.gz, sha256: $(sha256sum demo2.tar.gz | cut -d' ' -f1)}" "keep_source: /opt/demo"
expect_rc 3 locked-archive sb build archive.yaml --locked -o out-bad --store "$STORE"
grep -q "demo2.tar.gz" locked-archive.err || { show_output locked-archive; fail "the refusal does not name the archive"; }
[[ ! -e out-bad ]] || fail "a refused locked build left out-bad"

check "keep_source at a path the layers below have is refused"
recipe taken.yaml "{path: demo}" "keep_source: /opt/taken"
expect_rc 1 taken sb build taken.yaml -o out-bad --store "$STORE"
grep -q 'already exists in the layers below' taken.err || { show_output taken; fail "expected a clear error for /opt/taken"; }
[[ ! -e out-bad ]] || fail "a failed build left out-bad"
pass
