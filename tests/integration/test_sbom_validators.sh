#!/usr/bin/env bash
# stackbuild's SBOMs read by tools nobody here wrote: the SPDX project's own
# validator (pyspdxtools, from spdx-tools) finds nothing wrong with them, the
# NTIA minimum-elements checker (ntia-conformance-checker) finds every
# element where the image's packages state them (names, versions, purls,
# suppliers, author, time, relationships), and CycloneDX's own library
# (cyclonedx-python-lib) validates the CycloneDX form against the 1.5 JSON
# schema, strictly (no property the schema does not name). The image: Debian packages of a
# fixture repository (made with dpkg-deb), Python projects' metadata in the
# forms found in the wild (License-Expression, a License that is no SPDX
# identifier, classifiers, Requires-Dist with markers and extras, an
# egg-info file), a CUDA version.json, a vendor label, and source trees
# (dev.stackbuild.source.* labels as stackbuild writes them for layers
# compiled from or keeping a source; set by the recipe here, so that no
# sandbox is needed): a git repository at a commit, a patched archive, a
# file:// mirror (no download location SPDX accepts).
# The tools come from scripts/install-deps.sh --with-tests ($STACKBUILD_SPDX_VENV,
# default /opt/stackbuild-spdx-venv); without them the test is skipped.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=apt_lib.sh
source "$HERE/apt_lib.sh"
venv=${STACKBUILD_SPDX_VENV:-/opt/stackbuild-spdx-venv}
[[ -x "$venv/bin/pyspdxtools" && -x "$venv/bin/ntia-checker" ]] &&
  "$venv/bin/python" -c 'import cyclonedx.validation.json, jsonschema' 2>/dev/null ||
  skip "spdx-tools, ntia-conformance-checker and cyclonedx-python-lib are not in $venv (scripts/install-deps.sh --with-tests)"
require_tool dpkg-deb gzip sha256sum
cd "$TMP"

www="$TMP/www"
mkdeb main libgreet 1:1.0+dfsg-1 "" usr/lib/libgreet.so.1
mkdeb main hello 2.10-3 "libother | libgreet (>= 1:1.0)" usr/bin/hello
publish main unsigned
serve_dir "$www"

site=site
meta() {  # $1: dir, then the METADATA lines
  local d=$site/$1
  shift
  mkdir -p "$d"
  printf '%s\n' "Metadata-Version: 2.1" "$@" "" "A description." >"$d/METADATA"
}
meta torch-2.7.0+cu126.dist-info "Name: torch" "Version: 2.7.0+cu126" "Author-email: PyTorch Team <packages@pytorch.org>" \
  "License: BSD-3-Clause" "Requires-Dist: filelock" "Requires-Dist: nvidia-cudnn-cu12==9.5.1.17; platform_system == \"Linux\"" \
  "Requires-Dist: opt-einsum>=3.3; extra == \"opt-einsum\"" "Project-URL: Homepage, https://pytorch.org/"
meta filelock-3.16.1.dist-info "Name: filelock" "Version: 3.16.1" "License-Expression: Unlicense" \
  "Author-email: Bernát Gábor <gaborjbernat@gmail.com>"
meta nvidia_cudnn_cu12-9.5.1.17.dist-info "Name: nvidia-cudnn-cu12" "Version: 9.5.1.17" \
  "License: NVIDIA Proprietary Software" "Author: Nvidia CUDA Installer Team"
meta typing_extensions-4.12.2.dist-info "Name: typing_extensions" "Version: 4.12.2" \
  "Classifier: License :: OSI Approved :: Python Software Foundation License" "Author: Guido van Rossum"
printf 'Metadata-Version: 1.1\nName: oldstyle\nVersion: 0.9\nAuthor: Someone\nLicense: Apache-2.0 OR MIT\n' >"$site/oldstyle-0.9.egg-info"
mkdir -p cuda
printf '{"cuda": {"name": "CUDA SDK", "version": "12.6.3"}, "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.6.77"}}\n' \
  >cuda/version.json
printf 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Fixture 12"\n' >os-release
# Debian's copyright files: a machine-readable one, and one that names a license SPDX has no identifier for.
mkdir -p doc/libgreet doc/hello
printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nCopyright: 2001 A\nLicense: GPL-2+ or Artistic, and BSD-3-clause\n\nFiles: debian/*\nLicense: Expat\n\nLicense: Expat\n Permission is hereby granted\n' \
  >doc/libgreet/copyright
printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nLicense: GPL-3+\n\nFiles: tz/*\nLicense: public-domain\n' \
  >doc/hello/copyright
commit=2236df1770800ffea5697b11b0bb0d910b2e59e1
sum=$(printf tool | sha256sum | cut -d' ' -f1)
cat >r.yaml <<EOF
stack: sbomv
source_date_epoch: 1700000000
repositories:
  - {url: "$SERVED_URL/main", suites: [test], trusted: true}
layers:
  - {name: base, apt: [hello]}
  - name: more
    copy:
      - {src: site/, dst: /usr/local/lib/python3.11/site-packages/}
      - {src: cuda/, dst: /usr/local/cuda-12.6/}
      - {src: os-release, dst: /etc/os-release}
      - {src: doc/, dst: /usr/share/doc/}
config:
  labels:
    org.opencontainers.image.vendor: "Example Corp"
    dev.stackbuild.source.torch: '{"component":"pytorch","version":"2.6.0","git":"https://github.com/pytorch/pytorch","ref":"$commit","commit":"$commit","path":"/opt/pytorch","built":true}'
    dev.stackbuild.source.tool: '{"archive":"https://downloads.example.com/tool-1.0.tar.gz","sha256":"$sum","patches":[{"path":"fix.patch","sha256":"$sum"}],"built":true}'
    dev.stackbuild.source.mirror: '{"git":"file:///srv/mirror/lib","ref":"v1.0","path":"/opt/lib","built":false}'
tags: ["sbomv:1"]
EOF
expect_ok build sb build r.yaml -o "$TMP/L" --store "$STORE"
expect_ok sbom sb sbom "$TMP/L:1" --store "$STORE" -o "$TMP/doc.json"

check "pyspdxtools reads and validates the document"
expect_ok spdx "$venv/bin/pyspdxtools" -i "$TMP/doc.json"
grep -qi "error\|invalid" "$TMP/spdx.out" "$TMP/spdx.err" && { show_output spdx; fail "pyspdxtools reports a problem"; }

check "the NTIA checker finds every minimum element"
expect_ok ntia "$venv/bin/ntia-checker" "$TMP/doc.json"
grep -q "Conformant: True" "$TMP/ntia.out" || { show_output ntia; fail "not NTIA conformant"; }

check "CycloneDX's library validates the CycloneDX form against the 1.5 schema, strictly"
expect_ok cdx sb sbom "$TMP/L:1" --store "$STORE" --format cyclonedx -o "$TMP/cdx.json"
"$venv/bin/python" - "$TMP/cdx.json" <<'PY' || fail "the CycloneDX document is not valid"
import sys
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(open(sys.argv[1]).read())
if error is not None:
    print(str(error)[:2000], file=sys.stderr)
    sys.exit(1)
PY
python3 - "$TMP/doc.json" "$TMP/cdx.json" <<'PY' || fail "the CycloneDX form does not say what the SPDX one says"
import json, sys
spdx, cdx = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
purls = lambda ps: sorted(p["externalRefs"][0]["referenceLocator"] for p in ps)
assert purls(spdx["packages"][1:]) == sorted(c["purl"] for c in cdx["components"])
assert cdx["serialNumber"] == spdx["documentNamespace"]
assert cdx["metadata"]["component"]["purl"] == spdx["packages"][0]["externalRefs"][0]["referenceLocator"]
edges = sum(len(d["dependsOn"]) for d in cdx["dependencies"][1:])
assert edges == sum(r["relationshipType"] == "DEPENDS_ON" for r in spdx["relationships"]), edges
PY

check "the packages the tools read are the image's"
python3 - "$TMP/doc.json" <<'PY' || fail "the document does not list the image's packages"
import json, sys
d = json.load(open(sys.argv[1]))
names = sorted(p["name"] for p in d["packages"][1:])
assert names == ["cuda", "cuda_cudart", "filelock", "hello", "libgreet", "mirror", "nvidia-cudnn-cu12", "oldstyle",
                 "pytorch", "tool", "torch", "typing_extensions"], names
src = {p["name"]: p for p in d["packages"] if p.get("primaryPackagePurpose") == "SOURCE"}
assert sorted(src) == ["mirror", "pytorch", "tool"], sorted(src)
assert src["pytorch"]["downloadLocation"] == "git+https://github.com/pytorch/pytorch@2236df1770800ffea5697b11b0bb0d910b2e59e1"
assert src["tool"]["downloadLocation"] == "https://downloads.example.com/tool-1.0.tar.gz", src["tool"]
assert src["mirror"]["downloadLocation"] == "NOASSERTION", src["mirror"]
lic = {p["name"]: p["licenseDeclared"] for p in d["packages"]}
assert lic["oldstyle"] == "Apache-2.0 OR MIT" and lic["typing_extensions"] == "PSF-2.0", lic
assert lic["nvidia-cudnn-cu12"] == "NOASSERTION", lic
assert lic["libgreet"] == "(GPL-2.0-or-later OR Artistic-1.0-Perl) AND BSD-3-Clause AND MIT", lic
assert lic["hello"] == "GPL-3.0-or-later AND LicenseRef-public-domain", lic
refs = [i["licenseId"] for i in d["hasExtractedLicensingInfos"]]
assert refs == ["LicenseRef-public-domain"], refs
PY
pass
