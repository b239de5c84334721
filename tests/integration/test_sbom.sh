#!/usr/bin/env bash
# SBOMs of built images, checked against real tools: an apt layer from a
# fixture repository (packages made with dpkg-deb) and a layer of Python
# projects' *.dist-info;
#   - `build --sbom` adds an SPDX document to the OCI layout as an artifact
#     whose subject is the image (the layout valid against the OCI schemas);
#     skopeo still copies the image out of that layout, and the layout's
#     index lists the image once for umoci;
#   - `stackbuild sbom LAYOUT:TAG` gives the same bytes, from a fresh store too;
#   - its Debian packages are the ones dpkg-query reads from the unpacked
#     image, with their versions, and hello DEPENDS_ON libgreet;
#   - `push` sends the SBOM along: the registry (distribution 2.8, no
#     referrers API) lists it under the referrers tag, with the same bytes;
#     `build --sbom --push-to` and `sbom --attach` attach it too;
#   - `--format cyclonedx --add-to-layout` adds the CycloneDX form beside it;
#   - `--diff OLD` prints what changed since another image, for release notes;
#   - bad uses are clear errors.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=apt_lib.sh
source "$HERE/apt_lib.sh"
source "$HERE/registry/lib.sh"
require_tool dpkg-deb dpkg-query gzip sha256sum skopeo umoci
require_registry
cd "$TMP"

www="$TMP/www"
mkdeb main libgreet 1.0 "" usr/lib/libgreet.so.1
mkdeb main hello 1.0 "libgreet (>= 1.0)" usr/bin/hello
# A package with a maintainer script: the apt layer leaves it "install ok
# unpacked" (docs/apt.md); its files are in the image, so the SBOM lists it.
mkdeb main withscript 1.0 "" usr/bin/withscript
printf '#!/bin/sh\nexit 0\n' >"$TMP/src/main-withscript-1.0/DEBIAN/postinst"
chmod 755 "$TMP/src/main-withscript-1.0/DEBIAN/postinst"
dpkg-deb --root-owner-group -Zgzip --build "$TMP/src/main-withscript-1.0" "$www/main/pool/withscript_1.0_amd64.deb" >/dev/null
publish main unsigned
serve_dir "$www"

site=site
mkdir -p "$site/rich-1.0.dist-info" "$site/markdown_it_py-3.0.0.dist-info"
printf 'Metadata-Version: 2.1\nName: rich\nVersion: 1.0\nLicense-Expression: MIT\nRequires-Dist: markdown-it-py>=2.2.0\n\nbody\n' \
  >"$site/rich-1.0.dist-info/METADATA"
printf 'Metadata-Version: 2.1\nName: markdown-it-py\nVersion: 3.0.0\nLicense: MIT\n' \
  >"$site/markdown_it_py-3.0.0.dist-info/METADATA"
printf 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Fixture 12"\n' >os-release
cat >r.yaml <<EOF
stack: sbomt
source_date_epoch: 1700000000
repositories:
  - {url: "$SERVED_URL/main", suites: [test], trusted: true}
layers:
  - {name: base, apt: [hello, withscript]}
  - name: py
    copy:
      - {src: site/, dst: /usr/local/lib/python3.11/site-packages/}
      - {src: os-release, dst: /etc/os-release}
tags: ["sbomt:1"]
EOF

check "build --sbom adds the SBOM to the layout as an artifact referring to the image"
expect_ok build sb build r.yaml -o "$TMP/L" --store "$STORE" --sbom
grep -q "^sbom of sbomt:1: sha256:" "$TMP/build.err" || { show_output build; fail "no 'sbom of' result line"; }
IMG=$(manifest_digest "$TMP/L" 1)
python3 - "$TMP/L" "$IMG" "$TMP/layout-sbom.path" <<'PY' || fail "the layout's SBOM artifact is wrong"
import json, sys, os
L, img = sys.argv[1], sys.argv[2]
idx = json.load(open(os.path.join(L, "index.json")))
arts = [m for m in idx["manifests"] if m.get("artifactType") == "application/spdx+json"]
assert len(arts) == 1 and len(idx["manifests"]) == 2, idx
a = arts[0]
assert "org.opencontainers.image.ref.name" not in a.get("annotations", {}), a
m = json.load(open(os.path.join(L, "blobs/sha256", a["digest"][7:])))
assert m["subject"]["digest"] == "sha256:" + img, m
assert m["config"]["mediaType"] == "application/vnd.oci.empty.v1+json", m
assert m["layers"][0]["mediaType"] == "application/spdx+json", m
blob = os.path.join(L, "blobs/sha256", m["layers"][0]["digest"][7:])
open(sys.argv[3], "w").write(blob)
PY
if [[ -f "$SCHEMAS/image-manifest-schema.json" ]] && python3 -c 'import jsonschema' 2>/dev/null; then
  check "the layout, the artifact with it, is valid against the OCI schemas"
  python3 "$HERE/validate_oci.py" "$SCHEMAS" "$TMP/L" >"$TMP/schema.out" 2>&1 ||
    { cat "$TMP/schema.out" >&2; fail "the layout with its SBOM is not a valid OCI layout"; }
fi

check "skopeo copies the image out of that layout; umoci lists only the image"
expect_ok skopeo skopeo copy "oci:$TMP/L:1" "oci:$TMP/C:1"
expect_ok umoci umoci ls --layout "$TMP/L"
[[ "$(cat "$TMP/umoci.out")" == "1" ]] || { show_output umoci; fail "umoci ls lists more than the image"; }

check "stackbuild sbom LAYOUT:TAG gives the same bytes, and so does a fresh store (layers read again)"
expect_ok sbom sb sbom "$TMP/L:1" --store "$STORE" -o "$TMP/doc.json"
cmp -s "$TMP/doc.json" "$(cat "$TMP/layout-sbom.path")" || fail "sbom and build --sbom differ"
expect_ok stdout "$SB" sbom "$TMP/L:1" --store "$TMP/store2"
cmp -s "$TMP/doc.json" "$TMP/stdout.out" || fail "a fresh store gives another document"

check "its Debian packages are what dpkg-query reads from the unpacked image"
expect_ok unpack sb unpack "$TMP/L:1" "$TMP/root" --store "$STORE"
dpkg-query --admindir="$TMP/root/var/lib/dpkg" -W -f '${Package} ${Version}\n' | sort >"$TMP/dpkg.txt"
dpkg-query --admindir="$TMP/root/var/lib/dpkg" -W -f '${Status}\n' withscript | grep -qx "install ok unpacked" ||
  fail "the fixture's package with a postinst is not left unpacked; the check below would not cover that case"
python3 - "$TMP/doc.json" "$TMP/dpkg.txt" <<'PY' || fail "the SBOM does not match the image"
import json, sys
d = json.load(open(sys.argv[1]))
pk = {p["SPDXID"]: p for p in d["packages"]}
purl = lambda p: p["externalRefs"][0]["referenceLocator"]
debs = sorted(f'{p["name"]} {p["versionInfo"]}' for p in d["packages"] if purl(p).startswith("pkg:deb/"))
want = open(sys.argv[2]).read().split("\n")[:-1]
assert debs == want, (debs, want)
assert purl(next(p for p in d["packages"] if p["name"] == "hello")) == \
    "pkg:deb/debian/hello@1.0?arch=amd64&distro=debian-12", purl
py = {p["name"]: p for p in d["packages"] if purl(p).startswith("pkg:pypi/")}
assert set(py) == {"rich", "markdown-it-py"}, py
assert py["rich"]["licenseDeclared"] == "MIT" and py["markdown-it-py"]["licenseDeclared"] == "MIT", py
ident = {p["name"]: p["SPDXID"] for p in d["packages"]}
rels = {(r["spdxElementId"], r["relationshipType"], r["relatedSpdxElement"]) for r in d["relationships"]}
assert (ident["hello"], "DEPENDS_ON", ident["libgreet"]) in rels, rels
assert (ident["rich"], "DEPENDS_ON", ident["markdown-it-py"]) in rels, rels
assert ("SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image") in rels
assert all(("SPDXRef-Image", "CONTAINS", i) in rels for i in pk if i != "SPDXRef-Image")
assert d["creationInfo"]["created"] == "2023-11-14T22:13:20Z", d["creationInfo"]  # source_date_epoch
PY
[[ "$(json "$TMP/doc.json" 'j["packages"][0]["versionInfo"]')" == "sha256:$IMG" ]] || fail "the image package is not the image"

start_registry reg
R="127.0.0.1:$REG_PORT"
check "push sends the SBOM along: the referrers tag lists it, with the same bytes"
expect_ok push sb push "$TMP/L:1" "$R/sbomt:1" --store "$STORE"
curl -sf -H "Accept: application/vnd.oci.image.index.v1+json" "http://$R/v2/sbomt/manifests/sha256-$IMG" \
  >"$TMP/referrers.json" || { show_output push; fail "no referrers tag sha256-$IMG"; }
art=$(json "$TMP/referrers.json" '[m["digest"] for m in j["manifests"] if m.get("artifactType") == "application/spdx+json"][0]')
[[ "$art" == "$(json "$TMP/L/index.json" '[m["digest"] for m in j["manifests"] if "artifactType" in m][0]')" ]] ||
  fail "the pushed artifact manifest is not the layout's"
curl -sf -H "Accept: application/vnd.oci.image.manifest.v1+json" "http://$R/v2/sbomt/manifests/$art" >"$TMP/pushed-art.json"
blob=$(json "$TMP/pushed-art.json" 'j["layers"][0]["digest"]')
curl -sf "http://$R/v2/sbomt/blobs/$blob" >"$TMP/pushed-sbom.json"
cmp -s "$TMP/pushed-sbom.json" "$TMP/doc.json" || fail "the pushed SBOM differs from the layout's"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Accept: application/vnd.oci.image.manifest.v1+json" "http://$R/v2/sbomt/manifests/latest")
[[ "$code" == 404 ]] || fail "the artifact was pushed as an image tagged latest"

check "build --sbom --push-to attaches the SBOM; sbom --attach adds the CycloneDX form"
expect_ok bpush sb build r.yaml -o "$TMP/L3" --store "$STORE" --sbom --push-to "$R/pushed" --no-verify
grep -q "SBOM of sbomt:1 attached to $R/pushed@sha256:$IMG" "$TMP/bpush.err" || { show_output bpush; fail "no attach message"; }
expect_ok attach sb sbom "$R/pushed:1" --store "$STORE" --format cyclonedx --attach "$R/pushed" -o "$TMP/attached.json"
curl -sf -H "Accept: application/vnd.oci.image.index.v1+json" "http://$R/v2/pushed/manifests/sha256-$IMG" \
  >"$TMP/referrers2.json" || fail "no referrers tag in $R/pushed"
[[ "$(json "$TMP/referrers2.json" 'sorted(m["artifactType"] for m in j["manifests"])')" == \
   "['application/spdx+json', 'application/vnd.cyclonedx+json']" ]] || fail "referrers: $(cat "$TMP/referrers2.json")"

check "sbom REGISTRY/REPO:TAG pulls the image and gives the same document"
expect_ok sbomref sb sbom "$R/sbomt:1" --store "$TMP/store3" -o "$TMP/ref.json"
cmp -s "$TMP/doc.json" "$TMP/ref.json" || fail "sbom REF differs from the layout's SBOM"
[[ "$(json "$TMP/ref.json" 'j["name"]')" == "sbomt:1" ]] || fail "the document does not name the image sbomt:1"

check "the CycloneDX form goes into the layout beside the SPDX one; readers still see one image"
expect_ok cdx sb sbom "$TMP/L:1" --store "$STORE" --format cyclonedx --add-to-layout -o "$TMP/cdx.json"
[[ "$(json "$TMP/cdx.json" 'j["bomFormat"] + " " + j["specVersion"]')" == "CycloneDX 1.5" ]] || fail "not CycloneDX 1.5"
[[ "$(json "$TMP/L/index.json" 'sorted(m.get("artifactType", "-") for m in j["manifests"])')" == \
   "['-', 'application/spdx+json', 'application/vnd.cyclonedx+json']" ]] || fail "the layout's index: $(cat "$TMP/L/index.json")"
expect_ok umoci2 umoci ls --layout "$TMP/L"
[[ "$(cat "$TMP/umoci2.out")" == "1" ]] || { show_output umoci2; fail "umoci ls lists more than the image"; }
expect_ok single sb unpack "$TMP/L" "$TMP/root2" --store "$STORE"  # the one image, no ref needed

check "sbom --diff: what changed since another image, as a Markdown table for release notes"
sed -i 's/^Version: 1.0$/Version: 1.1/' "$site/rich-1.0.dist-info/METADATA"
mkdir -p "$site/pygments-2.19.1.dist-info"
printf 'Metadata-Version: 2.1\nName: Pygments\nVersion: 2.19.1\n' >"$site/pygments-2.19.1.dist-info/METADATA"
expect_ok build2 sb build r.yaml -o "$TMP/L" --store "$STORE" --tag sbomt:2
expect_ok diff sb sbom "$TMP/L:2" --diff "$TMP/L:1" --store "$STORE"
cat >"$TMP/diff.want" <<'MD'
## Packages: sbomt:1 to sbomt:2

1 changed, 1 added, 0 removed, 4 unchanged.

| package | kind | sbomt:1 | sbomt:2 |
|---|---|---|---|
| pygments | python | - | 2.19.1 |
| rich | python | 1.0 | 1.1 |
MD
diff -u "$TMP/diff.want" "$TMP/diff.out" >&2 || fail "sbom --diff printed something else"
expect_rc 2 diffformat sb sbom "$TMP/L:2" --diff "$TMP/L:1" --store "$STORE" --format cyclonedx

check "bad uses: an unknown --format, docker-archive with --sbom, JSON progress without -o, a path that is neither"
expect_rc 2 badformat sb sbom "$TMP/L:1" --store "$STORE" --format xml
grep -q "wants spdx or cyclonedx" "$TMP/badformat.err" || { show_output badformat; fail "no clear error for --format"; }
expect_rc 2 dockerarch sb build r.yaml --format docker-archive -o "$TMP/x.tar" --store "$STORE" --sbom
grep -q -- "--sbom goes into an OCI layout" "$TMP/dockerarch.err" || { show_output dockerarch; fail "no clear error"; }
[[ ! -e "$TMP/x.tar" ]] || fail "a docker-archive was written"
expect_rc 2 jsonout "$SB" sbom "$TMP/L:1" --store "$STORE" --json
grep -q "give -o FILE" "$TMP/jsonout.err" || { show_output jsonout; fail "no clear error for --json"; }
expect_rc 2 neither sb sbom "$TMP/nothing-here" --store "$STORE"
grep -q "no OCI layout at $TMP/nothing-here" "$TMP/neither.err" || { show_output neither; fail "no clear error"; }
expect_rc 1 noimage sb sbom "$TMP/L:3" --store "$STORE"
grep -q "no image '3'" "$TMP/noimage.err" || { show_output noimage; fail "no clear error for a missing ref"; }
pass
