#!/usr/bin/env bash
# `stackbuild notes` of images in a registry (distribution 2.8 on 127.0.0.1):
# last month's release pushed with `build --sbom --push-to` (each point under its
# tag, the matrix index under --index-tag), read back without pulling a layer:
# the packages from each image's attached SBOM, the test report attached by
# `test --attach`. The data is the same as from the layout the build wrote,
# both as LAYOUT and as --since; `sbom --diff` against a registry's image
# reads its attached SBOM too; `pull` of the matrix index names its images
# rather than taking the first, and `pull --all` takes them all, which notes
# reads as it reads the registry. An image without an SPDX SBOM is read from a
# CycloneDX one, and one with none is pulled and read from its layers. A
# missing tag is an error naming it, an index of artifacts a usage error; a
# missing layout is not taken for a reference.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry

R="$TMP/recipe"
mkdir -p "$R/site/numpy-2.2.5.dist-info"
printf 'Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u4\n\n' >"$R/status"
printf 'Metadata-Version: 2.1\nName: numpy\nVersion: 2.2.5\n' >"$R/site/numpy-2.2.5.dist-info/METADATA"
printf 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n' >"$R/os-release"
recipe() {  # $1: release
  cat >"$R/nt.yaml" <<YAML
stack: nt
release: "$1"
source_date_epoch: 1700000000
matrix:
  cuda: ["12.6", "12.8"]
  arch: [["9.0"]]
layers:
  - name: base
    copy:
      - {src: status, dst: /var/lib/dpkg/status}
      - {src: os-release, dst: /etc/os-release}
      - {src: site/, dst: /usr/local/lib/python3.11/dist-packages/}
config:
  env: {NVIDIA_REQUIRE_CUDA: "\${nvidia_require_cuda}"}
  labels: {dev.stackbuild.version.os: "12"}
annotations: {title: NT, version: "\${release}-cuda\${cuda}"}
tags: ["nt:\${release}-cuda\${cuda}"]
YAML
}
start_registry plain
REG="127.0.0.1:$REG_PORT"
# same_data A B WHAT: the data of A and B (--data) are the same but for what
# names where they came from; else fails with the difference.
same_data() {
  python3 - "$1" "$2" <<'PY' || fail "$3"
import difflib, json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for d in (a, b):
    assert d["images"], "no images"
    for k in ("layout", "since"): d.pop(k, None)
ta, tb = (json.dumps(d, indent=1, sort_keys=True).splitlines() for d in (a, b))
if ta != tb:
    sys.exit("\n".join(difflib.unified_diff(ta, tb, lineterm="")))
PY
}

recipe 26.10
expect_ok old sb build "$R/nt.yaml" -o "$TMP/old" --store "$STORE" --sbom --no-verify \
  --push-to "$REG/team/nt" --index-tag 26.10
expect_ok attach sb test "$TMP/old:26.10-cuda12.8" --store "$STORE" --attach "$REG/team/nt"

check "notes of a registry's release: the same data as from the layout, and no layer pulled"
S2="$TMP/store2"
expect_ok reg sb notes "$REG/team/nt:26.10" --store "$S2" --data
expect_ok lay sb notes "$TMP/old" --store "$STORE" --data
python3 - "$TMP/reg.out" <<'PY' || { show_output reg; fail "the registry's data"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["stack"] == "nt" and d["release"] == "26.10", d
assert [i["name"] for i in d["images"]] == ["nt:26.10-cuda12.6", "nt:26.10-cuda12.8"], d["images"]
assert [i["ref"] for i in d["images"]] == ["26.10-cuda12.6", "26.10-cuda12.8"], d["images"]
img = d["images"][1]
assert img["packages"]["deb"] == 1 and img["packages"]["python"] == 1, img["packages"]
assert img["os"] == "Debian GNU/Linux 12 (bookworm)", img["os"]
assert img["cells"][0] == "Debian 12", img["cells"]
assert "tested" in img and "tested" not in d["images"][0], d["images"]
PY
# The layout has no report: the rest is the same.
python3 - "$TMP/reg.out" "$TMP/reg.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i in d["images"]: i.pop("tested", None)
json.dump(d, open(sys.argv[2], "w"))
PY
same_data "$TMP/reg.json" "$TMP/lay.out" "the registry's data differs from the layout's"
grep -q "no SBOM attached" "$TMP/reg.err" && fail "an image was pulled though its SBOM is attached"
layers=$(python3 -c 'import json,sys; print(" ".join(l["digest"].split(":")[1] for l in json.load(open(sys.argv[1]))["layers"]))' \
  "$TMP/old/blobs/sha256/$(manifest_digest "$TMP/old" 26.10-cuda12.8)")
for l in $layers; do
  [[ -z "$(find "$S2" -name "$l*" -print -quit)" ]] || fail "layer $l was fetched into the store"
done

check "the page from a registry: the tested line from the attached report"
expect_ok regpage sb notes "$REG/team/nt:26.10" --store "$S2"
grep -q '^- \*\*Tested:\*\* [0-9]* passed, 0 failed' "$TMP/regpage.out" || { show_output regpage; fail "no Tested line"; }
grep -q '^| `nt:26.10-cuda12.6` | Debian 12 | 12.6' "$TMP/regpage.out" || { show_output regpage; fail "the table"; }

check "--since a registry's release: the same comparison as --since its layout"
recipe 26.11
printf 'Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u5\n\n' >"$R/status"
expect_ok new sb build "$R/nt.yaml" -o "$TMP/new" --store "$STORE" --no-verify
expect_ok since_reg sb notes "$TMP/new" --since "$REG/team/nt:26.10" --store "$STORE" --data
expect_ok since_lay sb notes "$TMP/new" --since "$TMP/old" --store "$STORE" --data
same_data "$TMP/since_reg.out" "$TMP/since_lay.out" "--since the registry differs from --since the layout"
python3 - "$TMP/since_reg.out" <<'PY' || { show_output since_reg; fail "the comparison"; }
import json, sys
d = json.load(open(sys.argv[1]))
c = d["images"][1]["compared"]
assert c["name"] == "nt:26.10-cuda12.8", c
assert c["packages"]["changed"] == 1 and c["packages"]["unchanged"] == 1, c["packages"]
assert c["packages"]["rows"] == [{"name": "libc6", "kind": "deb", "before": "2.36-9+deb12u4", "after": "2.36-9+deb12u5"}], c
assert d["since"].endswith("/team/nt:26.10"), d["since"]
PY

check "sbom --diff against a registry's image reads its attached SBOM: the layout's table, no layer pulled"
S4="$TMP/store4"
expect_ok diffreg sb sbom "$TMP/new:26.11-cuda12.8" --diff "$REG/team/nt:26.10-cuda12.8" --store "$S4"
expect_ok difflay sb sbom "$TMP/new:26.11-cuda12.8" --diff "$TMP/old:26.10-cuda12.8" --store "$STORE"
cmp "$TMP/diffreg.out" "$TMP/difflay.out" || { show_output diffreg; show_output difflay; fail "the tables differ"; }
grep -q "| libc6 | deb | 2.36-9+deb12u4 | 2.36-9+deb12u5 |" "$TMP/diffreg.out" || { show_output diffreg; fail "no libc6 row"; }
for l in $layers; do
  [[ -z "$(find "$S4" -name "$l*" -print -quit)" ]] || fail "sbom --diff fetched layer $l"
done

check "an image with a CycloneDX SBOM only, and one with none (pulled, read from its layers)"
expect_ok push2 sb build "$R/nt.yaml" -o "$TMP/new" --store "$STORE" --no-verify --push-to "$REG/team/nt2" --index-tag 26.11
expect_ok cdx sb sbom "$TMP/new:26.11-cuda12.8" --store "$STORE" --format cyclonedx --attach "$REG/team/nt2"
S3="$TMP/store3"
expect_ok mixed sb notes "$REG/team/nt2:26.11" --store "$S3" --data
expect_ok mixed_lay sb notes "$TMP/new" --store "$STORE" --data
same_data "$TMP/mixed.out" "$TMP/mixed_lay.out" "the mixed release's data differs from the layout's"
[[ $(grep -c "no SBOM attached" "$TMP/mixed.err") == 1 ]] || { show_output mixed; fail "not exactly one image pulled"; }
grep -q "$(manifest_digest "$TMP/new" 26.11-cuda12.6) has no SBOM attached" "$TMP/mixed.err" ||
  { show_output mixed; fail "the wrong image was pulled"; }

check "pull of a matrix index (two images of one platform) names both, rather than taking the first"
expect_rc 1 pullidx sb pull "$REG/team/nt:26.10" "$TMP/pulled:x" --store "$S2"
grep -q "lists 2 images for linux/amd64" "$TMP/pullidx.err" && grep -q "(nt:26.10-cuda12.6)" "$TMP/pullidx.err" &&
  grep -q "(nt:26.10-cuda12.8)" "$TMP/pullidx.err" || { show_output pullidx; fail "the ambiguity is not explained"; }
[[ ! -e "$TMP/pulled" ]] || fail "a layout was written"

check "pull --all of the matrix index: each point under its tags and the index, which notes reads as the registry"
expect_ok pullall sb pull --all "$REG/team/nt:26.10" "$TMP/pulled-all" --store "$STORE"
refs=$(json "$TMP/pulled-all/index.json" '" ".join(sorted(m["annotations"]["org.opencontainers.image.ref.name"] for m in j["manifests"]))')
[[ "$refs" == "26.10 26.10-cuda12.6 26.10-cuda12.8" ]] || fail "the pulled layout's refs: $refs"
for t in 26.10-cuda12.6 26.10-cuda12.8 26.10; do
  [[ "$(manifest_digest "$TMP/pulled-all" $t)" == "$(manifest_digest "$TMP/old" $t)" ]] || fail "$t differs from the built layout's"
done
expect_ok since_pulled sb notes "$TMP/new" --since "$TMP/pulled-all" --store "$STORE" --data
same_data "$TMP/since_pulled.out" "$TMP/since_reg.out" "--since the pulled layout differs from --since the registry"
expect_rc 2 allplat sb pull --all "$REG/team/nt:26.10" "$TMP/x" --platform linux/amd64 --store "$STORE"

check "a single image by its tag"
expect_ok one sb notes "$REG/team/nt:26.10-cuda12.6" --store "$S2" --data
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [i["ref"] for i in d["images"]] == ["26.10-cuda12.6"], d["images"]' \
  "$TMP/one.out" || { show_output one; fail "one image"; }

check "a missing tag names it, an index of artifacts names no image; a missing layout is not taken for a reference"
expect_rc 1 missing sb notes "$REG/team/nt:25.01" --store "$S2"
grep -q "25.01" "$TMP/missing.err" || { show_output missing; fail "the error does not name the tag"; }
d=$(manifest_digest "$TMP/old" 26.10-cuda12.8)
expect_rc 2 artifacts sb notes "$REG/team/nt:sha256-${d#sha256:}" --store "$S2"  # the referrers tag: SBOM and report
grep -q "names no image" "$TMP/artifacts.err" || { show_output artifacts; fail "an index of artifacts is not refused clearly"; }
expect_rc 2 nolayout sb notes "$TMP/new" --since "$TMP/nowhere/pytorch" --store "$STORE"
grep -q "not an OCI layout directory" "$TMP/nolayout.err" || { show_output nolayout; fail "no reason given"; }
for cmd in sbom test notes; do  # a relative path into a directory that is here: a missing layout, not a reference
  rc=0
  (cd "$TMP" && "$SB" $cmd new/nosuch:tag --store "$STORE" >/dev/null 2>"$TMP/relmiss.err") || rc=$?
  [[ $rc == 2 ]] && grep -Eq "(neither|not) an? .*(OCI layout|layout directory)" "$TMP/relmiss.err" ||
    { cat "$TMP/relmiss.err" >&2; fail "$cmd new/nosuch:tag: exit $rc"; }
done
pass
