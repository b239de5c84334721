#!/usr/bin/env bash
# build --provenance (issue 34): the SLSA provenance of an image, read by
# tools nobody here wrote. A recipe of a fixture apt repository (dpkg-deb),
# wheels of tests/integration/pip_index.py's index and a git source kept
# beside them, with its own catalog and lockfile, built --locked at one point
# of its matrix (--only), with --sbom and --provenance, and pushed (with
# --sign) to the real registry (distribution 2.8, which has no referrers API:
# the referrers tag scheme) on 127.0.0.1. Then:
# - the in-toto project's bindings (in-toto-attestation, check_provenance.py)
#   find the statement a valid in-toto Statement v1 with a valid SLSA
#   Provenance v1 predicate, its subject the manifest digest the layout and
#   the registry hold, and every input there with the digest sha256sum and
#   git give: the recipe, the lockfile, the catalog files, the .deb, the
#   wheels, the source's commit; the SBOM as a byproduct;
# - the OCI image-spec's JSON schemas accept the artifact manifest
#   (validate_oci.py on the layout);
# - the statement in the registry is the layout's, `stackbuild provenance`
#   shows it from both, and its signature verifies;
# - a tampered subject is caught: by the bindings' check, and by `stackbuild
#   provenance` (exit 3) on a layout whose artifact was rewritten to carry it;
#   a field the SLSA definition lacks is caught by the bindings.
# The bindings come from scripts/install-deps.sh --with-tests
# ($STACKBUILD_INTOTO_VENV, default /opt/stackbuild-intoto-venv); without them
# the test is skipped.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=apt_lib.sh
source "$HERE/apt_lib.sh"
# shellcheck source-path=SCRIPTDIR source=registry/lib.sh
source "$HERE/registry/lib.sh"
venv=${STACKBUILD_INTOTO_VENV:-/opt/stackbuild-intoto-venv}
"$venv/bin/python" -c 'import in_toto_attestation.v1.statement, in_toto_attestation.predicates.provenance.v1.provenance_pb2' \
  2>/dev/null || skip "in-toto-attestation is not in $venv (scripts/install-deps.sh --with-tests)"
require_tool git dpkg-deb gzip sha256sum skopeo openssl
require_registry
require_schemas
require_python_module jsonschema
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
glibc=$(ldd --version | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')
[[ -n $glibc ]] || skip "cannot tell this machine's glibc version"
checker() { "$venv/bin/python" "$HERE/check_provenance.py" "$@"; }

# The inputs: wheels, an unsigned apt repository (the recipe trusts it), a git source.
python3 "$HERE/pip_index.py" "$TMP/index" || fail "building the index"
serve_dir "$TMP/index"
export STACKBUILD_PIP_INDEX_URL="$SERVED_URL/simple" PIP_CONFIG_FILE=/dev/null
www="$TMP/www"
mkdeb main libgreet 1.0 "" usr/lib/libgreet.so.1
publish main unsigned
serve_dir "$www"
src="$TMP/torchy-src"
mkdir -p "$src" && echo real >"$src/REAL"
git init -q "$src"
git -C "$src" -c user.name=t -c user.email=t@example.invalid add -A
git -C "$src" -c user.name=t -c user.email=t@example.invalid commit -qm v2.0
git -C "$src" tag v2.0
commit=$(git -C "$src" rev-parse v2.0)

R="$TMP/r"
mkdir -p "$R/catalog"
cat >"$R/catalog/greet.yaml" <<EOF
component: greet
versions:
  - {version: "1.0", sources: {apt: [libgreet]}}
EOF
cat >"$R/catalog/torchy.yaml" <<EOF
component: torchy
versions:
  - version: "2.0"
    sources: {pip: ["torchy==2.0"], git: {url: "file://$src", ref: v2.0}}
EOF
cat >"$R/r.yaml" <<EOF
stack: prov
source_date_epoch: 1700000000
platform: {python: "$py", glibc: "$glibc"}
repositories: [{url: "$SERVED_URL/main", suites: [test], trusted: true}]
matrix:
  variant: ["x", "y"]
layers:
  - {name: greet, use: greet, version: "1.0", from: apt}
  - {name: torchy, use: torchy, version: "2.0", from: wheel, keep_source: /opt/torchy}
tags: ["prov:\${variant}"]
EOF

start_registry plain
REG="127.0.0.1:$REG_PORT"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TMP/key.pem" 2>/dev/null
openssl pkey -in "$TMP/key.pem" -pubout -out "$TMP/key.pub"

check "lock, then build --locked --only variant=x --sbom --provenance --push-to --sign"
expect_ok lock sb lock "$R/r.yaml" --catalog "$R/catalog" --store "$STORE"
expect_ok build sb build "$R/r.yaml" --catalog "$R/catalog" --locked --only variant=x --sbom --provenance \
  -o "$TMP/out" --store "$STORE" --push-to "$REG/team/prov" --insecure-registry "$REG" --no-verify \
  --sign "$TMP/key.pem"
image=$(manifest_digest "$TMP/out" x)
pushed=$(skopeo inspect --tls-verify=false --raw "docker://$REG/team/prov:x" | sha256sum | cut -d' ' -f1)
[[ $pushed == "$image" ]] || fail "the registry's prov:x is sha256:$pushed, the layout's sha256:$image"

check "stackbuild provenance shows the statement from the layout and from the registry, the same bytes"
expect_ok show sb provenance "$TMP/out:x" --store "$STORE" -o "$TMP/statement.json"
expect_ok show_reg sb provenance "$REG/team/prov:x" --store "$STORE" --insecure-registry "$REG" -o "$TMP/pushed.json"
cmp -s "$TMP/statement.json" "$TMP/pushed.json" || fail "the registry's statement differs from the layout's"

check "in-toto-attestation: a valid Statement v1 and SLSA Provenance v1 of the image, every input by its digest"
sha() { sha256sum "$1" | cut -d' ' -f1; }
deps=()
for f in "$R/r.yaml" "$R/r.yaml.lock" "$R/catalog/greet.yaml" "$R/catalog/torchy.yaml"; do
  deps+=("{\"name\": \"$f\", \"digest\": {\"sha256\": \"$(sha "$f")\"}}")
done
deps+=("{\"name\": \"libgreet_1.0_amd64.deb\", \"digest\": {\"sha256\": \"$(sha "$www/main/pool/libgreet_1.0_amd64.deb")\"}}")
for w in "$TMP"/index/files/torchy-2.0-*.whl "$TMP"/index/files/helper-1.1-*.whl; do
  deps+=("{\"name\": \"$(basename "$w")\", \"digest\": {\"sha256\": \"$(sha "$w")\"}}")
done
deps+=("{\"uri\": \"git+file://$src@v2.0\", \"digest\": {\"gitCommit\": \"$commit\"}}")
sbom=$(python3 - "$TMP/out" "$image" <<'PY'
import json, sys
idx = json.load(open(sys.argv[1] + "/index.json"))
for m in idx["manifests"]:
    if m.get("artifactType") != "application/spdx+json":
        continue
    a = json.load(open(f"{sys.argv[1]}/blobs/sha256/{m['digest'].split(':')[1]}"))
    if a["subject"]["digest"] == "sha256:" + sys.argv[2]:
        print(a["layers"][0]["digest"].split(":")[1])
PY
)
[[ -n $sbom ]] || fail "no SBOM beside the image in the layout"
(
  IFS=,
  printf '{"dependencies": [%s], "byproducts": [{"digest": {"sha256": "%s"}}], ' "${deps[*]}" "$sbom"
  printf '"externalParameters": {"recipe": "%s", "locked": true, "only": ["variant=x"], "matrix": {"variant": "x"}}}\n' "$R/r.yaml"
) >"$TMP/expected.json"
expect_ok validate checker "$TMP/statement.json" "$image" "$TMP/expected.json"
cat "$TMP/validate.out"

check "the OCI image-spec schemas accept the layout, the provenance artifact's manifest among its documents"
python3 "$HERE/validate_oci.py" "$SCHEMAS" "$TMP/out" >"$TMP/schema.out" 2>&1 ||
  fail "validate_oci.py: $(cat "$TMP/schema.out")"
artifact=$(python3 - "$TMP/out" "$image" <<'PY'
import json, sys
idx = json.load(open(sys.argv[1] + "/index.json"))
hits = [m["digest"] for m in idx["manifests"] if m.get("artifactType") == "application/vnd.in-toto+json"]
for d in hits:
    a = json.load(open(f"{sys.argv[1]}/blobs/sha256/{d.split(':')[1]}"))
    assert a["artifactType"] == "application/vnd.in-toto+json", a
    assert a["layers"][0]["mediaType"] == "application/vnd.in-toto+json", a
    assert a["subject"]["digest"] == "sha256:" + sys.argv[2], a
    print(d)
PY
) || fail "the provenance artifact's manifest is not of the image"
grep -q "${artifact:0:19}: image-manifest-schema.json: ok" "$TMP/schema.out" || fail "validate_oci.py did not check the artifact $artifact: $(cat "$TMP/schema.out")"

check "the pushed provenance artifact is signed with the build's key"
expect_ok verify sb verify "$REG/team/prov@$artifact" --key "$TMP/key.pub" --insecure-registry "$REG"

check "a tampered subject is caught by the bindings' check"
python3 - "$TMP/statement.json" "$TMP/tampered.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["subject"][0]["digest"]["sha256"] = "0" * 64
json.dump(s, open(sys.argv[2], "w"), indent=2)
PY
expect_rc 1 tampered checker "$TMP/tampered.json" "$image"
grep -q "not the image sha256:$image" "$TMP/tampered.err" || { show_output tampered; fail "not the subject's error"; }

check "... and by stackbuild provenance, exit 3, on a layout whose artifact carries it"
cp -a "$TMP/out" "$TMP/tampered-layout"
python3 - "$TMP/tampered-layout" "$artifact" "$TMP/tampered.json" <<'PY'
import hashlib, json, sys
layout, old, path = sys.argv[1], sys.argv[2], sys.argv[3]
def put(data):
    d = hashlib.sha256(data).hexdigest()
    open(f"{layout}/blobs/sha256/{d}", "wb").write(data)
    return "sha256:" + d, len(data)
a = json.load(open(f"{layout}/blobs/sha256/{old.split(':')[1]}"))
a["layers"][0]["digest"], a["layers"][0]["size"] = put(open(path, "rb").read())
digest, size = put(json.dumps(a).encode())
idx = json.load(open(layout + "/index.json"))
for m in idx["manifests"]:
    if m["digest"] == old:
        m["digest"], m["size"] = digest, size
json.dump(idx, open(layout + "/index.json", "w"))
PY
expect_rc 3 show_tampered sb provenance "$TMP/tampered-layout:x" --store "$STORE"
grep -q "the provenance is not of sha256:$image" "$TMP/show_tampered.err" ||
  { show_output show_tampered; fail "not the subject's error"; }

check "a field the SLSA v1 definition lacks is caught by the bindings"
python3 - "$TMP/statement.json" "$TMP/extra.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["predicate"]["runDetails"]["builder"]["name"] = "not a field of Builder"
json.dump(s, open(sys.argv[2], "w"))
PY
expect_rc 1 extra checker "$TMP/extra.json" "$image"
grep -q "no field named" "$TMP/extra.err" || { show_output extra; fail "not the definition's error"; }
pass
