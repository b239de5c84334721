#!/usr/bin/env bash
# `stackbuild notes`: the release notes of two releases of a small stack (a
# copy-only recipe whose matrix is CUDA, so the catalog's versions and driver
# floor land in the labels): the components table, each image's driver,
# architectures, packages (a dpkg status and a Python project copied in) and
# tests; with --since, what changed per image (matched by matrix point across
# releases whose tags differ), the new image and the one no longer built; a
# test report added to the layout (`test --add-to-layout`) on the page;
# --data, --template, and clear errors for a bad template or layout. Also
# checks that annotations take ${variables} (the image's version annotation).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

R="$TMP/recipe"
mkdir -p "$R/site/numpy-2.2.5.dist-info"
status() {  # the dpkg status: libc6, and $1 more packages named extra-N
  printf 'Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u%s\n\n' "$2"
  for ((i = 1; i <= $1; i++)); do
    printf 'Package: extra-%s\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0\n\n' "$i"
  done
}
status 0 4 >"$R/status"
printf 'Metadata-Version: 2.1\nName: numpy\nVersion: 2.2.5\n' >"$R/site/numpy-2.2.5.dist-info/METADATA"
printf 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n' >"$R/os-release"
recipe() {  # $1: release, $2: the matrix's CUDA versions
  cat >"$R/nt.yaml" <<YAML
stack: nt
release: "$1"
source_date_epoch: 1700000000
matrix:
  cuda: [$2]
  arch: [["8.0", "9.0"]]
layers:
  - name: base
    copy:
      - {src: status, dst: /var/lib/dpkg/status}
      - {src: os-release, dst: /etc/os-release}
      - {src: site/, dst: /usr/local/lib/python3.11/dist-packages/}
config:
  env: {NVIDIA_REQUIRE_CUDA: "\${nvidia_require_cuda}"}
  labels: {org.example.release: "\${release}"}
annotations: {title: NT, version: "\${release}-cuda\${cuda}", description: "Notes | test"}
tags: ["nt:\${release}-cuda\${cuda}"]
tests:
  - {name: smoke, run: "true"}
  - {name: driver, gpu: true, run: nvidia-smi}
YAML
}

recipe 26.10 '"12.6", "12.8"'
expect_ok old sb build "$R/nt.yaml" -o "$TMP/old" --store "$STORE" --no-verify

check "annotations and labels take \${variables}"
d=$(manifest_digest "$TMP/old" 26.10-cuda12.8)
[[ "$(json "$TMP/old/blobs/sha256/${d#sha256:}" 'j["annotations"]["org.opencontainers.image.version"]')" == "26.10-cuda12.8" ]] ||
  fail "the version annotation is not expanded"
cfg=$(json "$TMP/old/blobs/sha256/${d#sha256:}" 'j["config"]["digest"]')
[[ "$(json "$TMP/old/blobs/sha256/${cfg#sha256:}" 'j["config"]["Labels"]["org.example.release"]')" == "26.10" ]] ||
  fail "the label is not expanded"

# The next release: CUDA 12.6 dropped, 12.9 added; numpy and libc6 updated, a package added.
recipe 26.11 '"12.8", "12.9"'
status 1 5 >"$R/status"
mv "$R/site/numpy-2.2.5.dist-info" "$R/site/numpy-2.2.6.dist-info"
printf 'Metadata-Version: 2.1\nName: numpy\nVersion: 2.2.6\n' >"$R/site/numpy-2.2.6.dist-info/METADATA"
expect_ok new sb build "$R/nt.yaml" -o "$TMP/new" --store "$STORE" --no-verify

check "notes of one release: the components table and each image's facts"
expect_ok notes1 sb notes "$TMP/new" --store "$STORE"
n="$TMP/notes1.out"
grep -qx "# NT release 26.11" "$n" || { show_output notes1; fail "no title line"; }
grep -qx "Notes \\\\| test" "$n" || { show_output notes1; fail "the description is not there, '|' escaped"; }
grep -q "^| image | CUDA | digest |$" "$n" || { show_output notes1; fail "the table's columns"; }
grep -q '^| `nt:26.11-cuda12.8` | 12.8.[0-9]* | `[0-9a-f]\{12\}` |$' "$n" || { show_output notes1; fail "the 12.8 row"; }
grep -q '^| `nt:26.11-cuda12.9` | 12.9.[0-9]* |' "$n" || { show_output notes1; fail "the 12.9 row"; }
grep -q '^## nt:26.11-cuda12.9$' "$n" || fail "no section of the 12.9 image"
grep -q '^- \*\*Driver requirements:\*\* NVIDIA driver 5[0-9][0-9]\.[0-9.]* or later on Linux; on data-center GPUs also the R535, .*R570 branches (forward compatibility)$' "$n" ||
  { show_output notes1; fail "no driver requirement"; }
grep -q '^- \*\*GPU architectures:\*\* compute capability 8.0, 9.0$' "$n" || fail "no architectures"
grep -q '^- \*\*Packages:\*\* 2 Debian, 1 Python (its SBOM lists each)$' "$n" || { show_output notes1; fail "package counts"; }
grep -q '^- \*\*Tests:\*\* smoke; on a GPU: driver; built-in: cuda$' "$n" || { show_output notes1; fail "tests"; }
grep -q '^- \*\*Operating system:\*\* Debian GNU/Linux 12 (bookworm)$' "$n" || fail "no OS"
grep -q "Changes since" "$n" && fail "changes without --since"

if [[ $(id -u) == 0 ]]; then  # the tests run in the build sandbox
  check "a test report added to the layout: the page says what passed, failed (no shell for 'smoke') and was skipped"
  expect_rc 1 tested sb test "$TMP/new:26.11-cuda12.8" --store "$STORE" --add-to-layout
  expect_ok notes3 sb notes "$TMP/new" --store "$STORE"
  grep -q '^- \*\*Tested:\*\* [0-9]* passed, [1-9][0-9]* failed, [1-9][0-9]* skipped; no GPU, so the GPU tests were skipped (failed: .*recipe: smoke' "$TMP/notes3.out" ||
    { show_output notes3; show_output tested; fail "no Tested line"; }
  [[ $(grep -c '^- \*\*Tested:' "$TMP/notes3.out") == 1 ]] || fail "a Tested line for the image without a report"
  expect_rc 1 tested2 sb test "$TMP/new:26.11-cuda12.8" --store "$STORE" --add-to-layout  # replaced, not added
  [[ $(json "$TMP/new/index.json" 'sum(m.get("artifactType") == "application/vnd.stackbuild.test-report.v1+json" for m in j["manifests"])') == 1 ]] ||
    fail "a second report was added beside the first"
  python3 - "$TMP/new" <<'PY' || fail "the report's manifest does not say when it was made"
import json, re, sys
d = sys.argv[1]
idx = json.load(open(d + "/index.json"))
m = [m for m in idx["manifests"] if m.get("artifactType") == "application/vnd.stackbuild.test-report.v1+json"][0]
man = json.load(open(d + "/blobs/sha256/" + m["digest"].split(":")[1]))
created = man["annotations"]["org.opencontainers.image.created"]
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", created), created
PY
fi

check "--since: per image what changed, the new image, the one no longer built"
expect_ok notes2 sb notes "$TMP/new" --since "$TMP/old" --store "$STORE" -o "$TMP/notes.md"
n="$TMP/notes.md"
[[ -s "$n" && ! -s "$TMP/notes2.out" ]] || fail "-o: the notes are not in the file alone"
python3 - "$n" <<'PY' || { cat "$n" >&2; fail "the comparison is wrong"; }
import sys
text = open(sys.argv[1]).read()
s128 = text[text.index("## nt:26.11-cuda12.8"):text.index("## nt:26.11-cuda12.9")]
s129 = text[text.index("## nt:26.11-cuda12.9"):]
# matched across releases by its matrix point (the tags differ)
assert "### Changes since `nt:26.10-cuda12.8`" in s128, s128
assert "Packages: 2 changed, 1 added, 0 removed, 0 unchanged." in s128, s128
assert "| libc6 | deb | 2.36-9+deb12u4 | 2.36-9+deb12u5 |" in s128, s128
assert "| extra-1 | deb | - | 1.0 |" in s128, s128
assert "| numpy | python | 2.2.5 | 2.2.6 |" in s128, s128
assert "| CUDA |" not in s128.split("### Changes")[1], s128  # the same CUDA: no component row
assert "\n\n\n" not in text, "a blank line too many"
assert "New in this release." in s129 and "Changes since" not in s129, s129
assert "## No longer built" in text and "- `nt:26.10-cuda12.6` (`sha256:" in text, text
PY
grep -q "| numpy | python | 2.2.5 | 2.2.6 |" "$n" || fail "numpy's change is not listed"

check "--since a layout of pulled images (no matrix index, other tags): matched by CUDA X.Y"
cp -a "$TMP/old" "$TMP/pulled"
python3 - "$TMP/pulled/index.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["manifests"] = [m for m in j["manifests"] if "index" not in m["mediaType"]]
json.dump(j, open(sys.argv[1], "w"))
PY
expect_ok pulled sb notes "$TMP/new" --since "$TMP/pulled" --store "$STORE"
grep -q '^### Changes since `26.10-cuda12.8`$' "$TMP/pulled.out" || { show_output pulled; fail "not matched by CUDA"; }

check "two new images of one CUDA X.Y are not both the counterpart of the one old image of it"
sed -e 's/^  cuda: \[.*\]/  cuda: ["12.8"]\n  flavor: [a, b]/' -e 's/cuda\${cuda}"\]/cuda${cuda}-${flavor}"]/' \
  -e 's/org.example.release: "\${release}"/org.example.release: "${release}-${flavor}"/' "$R/nt.yaml" >"$R/two.yaml"
expect_ok two sb build "$R/two.yaml" -o "$TMP/two" --store "$STORE" --no-verify
expect_ok twonotes sb notes "$TMP/two" --since "$TMP/pulled" --store "$STORE" --data
python3 - "$TMP/twonotes.out" <<'PY' || { show_output twonotes; fail "one old image matched twice"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert [i["ref"] for i in d["images"]] == ["26.11-cuda12.8-a", "26.11-cuda12.8-b"], [i["ref"] for i in d["images"]]
assert all(i.get("new") for i in d["images"]), d["images"]
assert sorted(r["ref"] for r in d["removed_images"]) == ["26.10-cuda12.6", "26.10-cuda12.8"], d["removed_images"]
PY

check "--data: the fields a template gets"
expect_ok data sb notes "$TMP/new" --since "$TMP/old" --store "$STORE" --data
python3 - "$TMP/data.out" <<'PY' || fail "the data is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["stack"] == "nt" and d["release"] == "26.11" and d["title"] == "NT", d
assert [c["name"] for c in d["columns"]] == ["CUDA"], d["columns"]
img = d["images"][0]
assert img["ref"] == "26.11-cuda12.8" and img["name"] == "nt:26.11-cuda12.8" and img["arch_list"] == ["8.0", "9.0"], img
assert img["packages"] == {"total": 3, "deb": 2, "apk": 0, "python": 1, "cuda": 0, "source": 0}, img["packages"]
assert img["compared"]["name"] == "nt:26.10-cuda12.8" and img["compared"]["same"] is False, img["compared"]
assert d["images"][1]["new"] is True, d["images"][1]
assert [r["name"] for r in d["removed_images"]] == ["nt:26.10-cuda12.6"], d["removed_images"]
PY

check "--template renders a template of one's own; a broken one is an input error naming it"
printf '{{#images}}{{name}}={{#components}}{{key}}:{{version}},{{/components}}\n{{/images}}' >"$TMP/mine.mustache"
expect_ok mine sb notes "$TMP/new" --store "$STORE" --template "$TMP/mine.mustache"
grep -q "^nt:26.11-cuda12.8=cuda:12.8.[0-9]*,$" "$TMP/mine.out" || { show_output mine; fail "own template"; }
printf '{{#images}}{{ref}}\n' >"$TMP/broken.mustache"
expect_rc 3 broken sb notes "$TMP/new" --store "$STORE" --template "$TMP/broken.mustache" -o "$TMP/broken.md"
grep -q "broken.mustache" "$TMP/broken.err" || { show_output broken; fail "the error does not name the template"; }
[[ ! -e "$TMP/broken.md" ]] || fail "a broken template left a file"

check "a directory that is not a layout, or a missing --since, is a usage error"
expect_rc 2 notlayout sb notes "$R" --store "$STORE"
grep -q "not an OCI image layout" "$TMP/notlayout.err" || { show_output notlayout; fail "no reason given"; }
expect_rc 2 nosince sb notes "$TMP/new" --since "$TMP/nowhere" --store "$STORE"
pass
