#!/usr/bin/env bash
# The main job end to end (issue 9): recipes/pytorch.yaml for both of its CUDA
# points (Debian 12 from the configured apt archive, Python tools and torch's
# wheels with NVIDIA's CUDA libraries from the configured Python index) into one
# OCI layout, each image's SBOM beside it (valid SPDX and NTIA conformant where
# spdx-tools is installed); `stackbuild test` of each image (static checks and the recipe's
# tests; GPU tests skipped here); `build --push` to the real registry
# (distribution 2.8 on 127.0.0.1), then `skopeo copy` back and the digests
# compared, the SBOMs attached; `--cache-to` the registry, and a build with an
# empty store and `--cache-from` builds nothing and gives the same digests;
# Debian licenses in the SBOMs and the release notes (`stackbuild notes`), also read back
# from the registry through the attached SBOMs and reports; a
# second build rebuilds nothing and writes the same index.json, SBOMs included.
# Label e2e: downloads ~6 GB the first time (SB_E2E_STORE=DIR keeps them between runs)
# and needs ~25 GB of disk; not in the default run.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo
[[ $(id -u) == 0 ]] || skip "the tests run in the build sandbox, which needs root here"
S=${SB_E2E_STORE:-$STORE}
RECIPE="$SB_SOURCE_DIR/recipes/pytorch.yaml"
start_registry plain
REG="127.0.0.1:$REG_PORT"

check "the recipe resolves to two CUDA versions"
sb plan "$RECIPE" --json >"$TMP/plan.json" 2>/dev/null || fail "plan failed"
cudas=$(json "$TMP/plan.json" '" ".join(sorted(p["matrix"]["cuda"] for p in j["points"] if "resolved" in p))')
[[ $cudas == "12.6 12.8" ]] || fail "the points' CUDA versions are '$cudas'"

check "build --locked from the committed lockfile, as scripts/main.sh does: both points and the matrix index in one layout"
start=$(date +%s.%N)
sb build "$RECIPE" --locked -o "$TMP/out" --store "$S" --sbom >"$TMP/build1.out" 2>&1 || fail "build: $(tail -30 "$TMP/build1.out")"
# The digests the README states (they hold where the machine's Debian mirror is
# the default one: the image's apt sources name the machine's mirror).
for d in $(sed -n 's/^pytorch:26.11-[^:]*: sha256:\([0-9a-f]\{12\}\).*/\1/p' "$TMP/build1.out"); do
  grep -q "sha256:$d" "$SB_SOURCE_DIR/README.md" || say "note: digest $d is not the one the README states (another mirror, or the README is stale)"
done
cold=$(python3 -c "import time; print(round(time.time() - $start, 1))")
cat "$TMP/build1.out" | grep -A6 "^summary\|summary (" || true
for t in 26.11-2.7.0-cuda12.6 26.11-2.8.0-cuda12.8 pytorch-matrix; do
  manifest_digest "$TMP/out" "$t" >/dev/null || fail "no $t in the layout"
done
say "cold build: $cold s"
# The layout as built; the verified push below adds its test reports to it.
cp "$TMP/out/index.json" "$TMP/index-built.json"
python3 - "$TMP/out" <<'PY' || fail "image sizes"
import json, sys, os
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "index.json")))
for m in idx["manifests"]:
    ref = m.get("annotations", {}).get("org.opencontainers.image.ref.name")
    doc = json.load(open(os.path.join(d, "blobs", *m["digest"].split(":"))))
    if "layers" not in doc or "artifactType" in m:  # the index, the SBOMs
        continue
    size = sum(l["size"] for l in doc["layers"])
    cfg = json.load(open(os.path.join(d, "blobs", *doc["config"]["digest"].split(":"))))
    labels = cfg["config"].get("Labels", {})
    print(f"{ref}: {len(doc['layers'])} layers, {size / 1e9:.2f} GB compressed, "
          f"cudnn {labels.get('dev.stackbuild.version.cudnn')}, nccl {labels.get('dev.stackbuild.version.nccl')}")
PY
# The tools layer is the same in both points: one blob.
python3 - "$TMP/out" <<'PY' || fail "the points share no layer"
import json, sys, os
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "index.json")))
sets = []
for m in idx["manifests"]:
    doc = json.load(open(os.path.join(d, "blobs", *m["digest"].split(":"))))
    if "layers" in doc and "artifactType" not in m:
        sets.append({l["digest"] for l in doc["layers"]})
shared = set.intersection(*sets)
assert len(sets) == 2 and len(shared) >= 2, (len(sets), len(shared))
print(f"{len(shared)} layers shared by both points")
PY

check "each point's image has its SBOM in the layout: torch, its NVIDIA wheels and Debian's packages"
python3 - "$TMP/out" <<'PY' || fail "the SBOMs in the layout are wrong"
import json, sys, os
d = sys.argv[1]
blob = lambda dg: os.path.join(d, "blobs", *dg.split(":"))
idx = json.load(open(os.path.join(d, "index.json")))
images = {m["digest"]: m["annotations"]["org.opencontainers.image.ref.name"] for m in idx["manifests"]
          if "artifactType" not in m and "layers" in json.load(open(blob(m["digest"])))}
sboms = [m for m in idx["manifests"] if m.get("artifactType") == "application/spdx+json"]
assert len(images) == 2 and len(sboms) == 2, (images, sboms)
for a in sboms:
    m = json.load(open(blob(a["digest"])))
    ref = images[m["subject"]["digest"]]
    doc = json.load(open(blob(m["layers"][0]["digest"])))
    names = {p["name"]: p.get("versionInfo") for p in doc["packages"]}
    torch = "2.7.0" if "cuda12.6" in ref else "2.8.0"
    assert names.get("torch", "").startswith(torch), (ref, names.get("torch"))
    assert "nvidia-cudnn-cu12" in names and "libc6" in names and "python3.11" in names, ref
    assert doc["packages"][0]["versionInfo"] == m["subject"]["digest"], ref
    open(os.path.join(os.path.dirname(d), "sbom-" + ref + ".json"), "w").write(json.dumps(doc))
    print(f"{ref}: SBOM of {len(doc['packages']) - 1} packages, {len(doc['relationships'])} relationships")
PY
spdx_venv=${STACKBUILD_SPDX_VENV:-/opt/stackbuild-spdx-venv}
if [[ -x "$spdx_venv/bin/pyspdxtools" && -x "$spdx_venv/bin/ntia-checker" ]]; then
  for t in 26.11-2.7.0-cuda12.6 26.11-2.8.0-cuda12.8; do
    "$spdx_venv/bin/pyspdxtools" -i "$TMP/sbom-$t.json" || fail "pyspdxtools finds the SBOM of $t invalid"
    # Its whole report read first: grep -q would stop reading at the match and the
    # checker, still printing, dies of the broken pipe (a failure under pipefail).
    ntia=$("$spdx_venv/bin/ntia-checker" "$TMP/sbom-$t.json") || true
    grep -q "Conformant: True" <<<"$ntia" || fail "the SBOM of $t is not NTIA conformant"
  done
  say "both SBOMs: valid SPDX (pyspdxtools), NTIA conformant"
else
  say "note: no spdx-tools in $spdx_venv; the SBOMs were not validated"
fi

check "the Debian packages declare licenses from their copyright files, LicenseRefs defined"
python3 - "$TMP/sbom-26.11-2.7.0-cuda12.6.json" <<'PY' || fail "Debian licenses"
import json, sys
d = json.load(open(sys.argv[1]))
debs = [p for p in d["packages"][1:] if p["externalRefs"][0]["referenceLocator"].startswith("pkg:deb/")]
declared = [p for p in debs if p["licenseDeclared"] != "NOASSERTION"]
refs = {i["licenseId"] for i in d.get("hasExtractedLicensingInfos", [])}
used = {t.strip("()") for p in declared for t in p["licenseDeclared"].split() if t.strip("()").startswith("LicenseRef-")}
assert len(declared) * 2 > len(debs), (len(declared), len(debs))
assert used <= refs, used - refs
lic = {p["name"]: p["licenseDeclared"] for p in debs}
assert lic["zlib1g"] == "Zlib", lic["zlib1g"]
print(f"{len(declared)} of {len(debs)} Debian packages declare a license; {len(refs)} LicenseRefs defined")
PY

check "release notes of the layout: both points' components, driver and architectures"
sb notes "$TMP/out" --store "$S" -o "$TMP/notes.md" >"$TMP/notes.out" 2>&1 || fail "notes: $(tail -20 "$TMP/notes.out")"
grep -q '^| `pytorch:26.11-2.7.0-cuda12.6` | Debian 12 | 3.11 | 12.6.[0-9]* | 9.5.[0-9.]* | 2.26.[0-9]* | 2.7.0 | `' "$TMP/notes.md" &&
  grep -q '^| `pytorch:26.11-2.8.0-cuda12.8` | Debian 12 | 3.11 | 12.8.[0-9]* | 9.10.[0-9.]* | 2.27.[0-9]* | 2.8.0 | `' "$TMP/notes.md" &&
  grep -q '^- \*\*GPU architectures:\*\* compute capability 8.0, 8.6, 9.0$' "$TMP/notes.md" ||
  { cat "$TMP/notes.md" >&2; fail "the release notes lack a point's facts"; }
head -8 "$TMP/notes.md"

check "stackbuild test: static checks and recipe tests pass, GPU tests are skipped"
for t in 26.11-2.7.0-cuda12.6 26.11-2.8.0-cuda12.8; do
  if ! sb test "$TMP/out:$t" --store "$S" --report "$TMP/report-$t.json" >"$TMP/test-$t.out" 2>&1; then
    fail "test $t: $(tail -30 "$TMP/test-$t.out")"
  fi
  cat "$TMP/test-$t.out"
  python3 - "$TMP/report-$t.json" <<'PY' || fail "report of $t"
import json, sys
doc = json.load(open(sys.argv[1]))
reports = doc if isinstance(doc, list) else doc.get("reports", [doc])
results = [r for rep in reports for r in rep["results"]]
by = {}
for r in results:
    by.setdefault(r["outcome"], []).append(r["name"])
assert not by.get("failed"), by
assert any("gpu" in n or "nccl" in n for n in by.get("skipped", [])), by
assert by.get("passed"), by
print({k: len(v) for k, v in by.items()})
PY
done

check "build --push sends both points and the index; skopeo copies them back with the same digests"
sb build "$RECIPE" -o "$TMP/out" --store "$S" --sbom --push-to "$REG/ml/pytorch" >"$TMP/push.out" 2>&1 ||
  fail "build --push: $(tail -30 "$TMP/push.out")"
grep -c "^SBOM of .* attached to $REG/ml/pytorch@" "$TMP/push.out" | grep -qx 2 || fail "build --push attached no SBOMs: $(tail -30 "$TMP/push.out")"
[[ $(json "$TMP/out/index.json" 'sum(m.get("artifactType") == "application/vnd.stackbuild.test-report.v1+json" for m in j["manifests"])') == 2 ]] ||
  fail "the gate's reports are not in the layout"
sb notes "$TMP/out" --store "$S" -o "$TMP/notes-tested.md" >/dev/null 2>&1 || fail "notes after the gate"
[[ $(grep -c '^- \*\*Tested:\*\* [0-9]* passed, 0 failed, [0-9]* skipped; no GPU, so the GPU tests were skipped$' "$TMP/notes-tested.md") == 2 ]] ||
  { cat "$TMP/notes-tested.md" >&2; fail "the release notes do not say what was tested"; }
# The release as pushed, read back through its attached SBOMs and reports
# (no layer fetched into a new store): the same data as the layout's.
sb notes "$REG/ml/pytorch:pytorch-matrix" --store "$TMP/store-notes" --data -o "$TMP/notes-reg.json" >"$TMP/notes-reg.out" 2>&1 ||
  fail "notes from the registry: $(tail -20 "$TMP/notes-reg.out")"
sb notes "$TMP/out" --store "$S" --data -o "$TMP/notes-lay.json" >/dev/null 2>&1 || fail "notes --data of the layout"
python3 - "$TMP/notes-reg.json" "$TMP/notes-lay.json" <<'PY' || fail "the registry's release notes differ from the layout's"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for d in (a, b):
    d.pop("layout")
    for i in d["images"]:
        assert "tested" in i, i["ref"]
        i["tested"].pop("report")
assert a == b, (a, b)
assert [i["packages"]["deb"] for i in a["images"]] == [i["packages"]["deb"] for i in b["images"]]
PY
[[ $(du -sm "$TMP/store-notes" | cut -f1) -lt 20 ]] || fail "notes from the registry fetched layers"
for t in 26.11-2.7.0-cuda12.6 26.11-2.8.0-cuda12.8; do
  want="sha256:$(manifest_digest "$TMP/out" "$t")"
  skopeo copy --src-tls-verify=false "docker://$REG/ml/pytorch:$t" "oci:$TMP/back:$t" >/dev/null ||
    fail "skopeo copy of $t failed"
  got="sha256:$(manifest_digest "$TMP/back" "$t")"
  [[ $got == "$want" ]] || fail "$t: pulled back $got, built $want"
done

check "the build cache in the registry: a machine with an empty store builds both points from it, same digests"
start=$(date +%s.%N)
sb build "$RECIPE" -o "$TMP/out-to" --store "$S" --no-verify --cache-to "$REG/ml/pytorch-cache" >"$TMP/cache-to.out" 2>&1 ||
  fail "build --cache-to: $(tail -30 "$TMP/cache-to.out")"
say "cache-to (warm store, both points): $(python3 -c "import time; print(round(time.time() - $start, 1))") s; $(grep "^cache to" "$TMP/cache-to.out")"
start=$(date +%s.%N)
sb build "$RECIPE" -o "$TMP/out-cache" --store "$TMP/store-cache" --cache-from "$REG/ml/pytorch-cache" >"$TMP/cache-from.out" 2>&1 ||
  fail "build --cache-from: $(tail -30 "$TMP/cache-from.out")"
from_cache=$(python3 -c "import time; print(round(time.time() - $start, 1))")
python3 - "$TMP/cache-from.out" <<'PY' || fail "the build from the cache built layers: $(grep -A4 "summary (" "$TMP/cache-from.out")"
import re, sys
built = [int(n) for n in re.findall(r"(\d+) built, \d+ reused", open(sys.argv[1]).read())]
assert len(built) == 2 and all(n == 0 for n in built), built
PY
for t in 26.11-2.7.0-cuda12.6 26.11-2.8.0-cuda12.8 pytorch-matrix; do
  [[ "$(manifest_digest "$TMP/out-cache" "$t")" == "$(manifest_digest "$TMP/out" "$t")" ]] || fail "$t differs when built from the cache"
done
say "empty store with --cache-from: $from_cache s (cold $cold s)"
rm -rf "$TMP/store-cache" "$TMP/out-cache" "$TMP/out-to"

check "with a lockfile, a second build rebuilds nothing, reads no index and gives the same digests"
# Without a lockfile a rebuild resolves the apt and pip requirements against the
# indexes again (seconds of network); `lock` pins them, as a release pipeline does.
# The committed lockfile comes along: `lock` keeps it (it is current), so the
# rebuild is of the same pins as the first build, however the indexes moved since.
cp "$RECIPE" "$TMP/pytorch.yaml"
cp "$RECIPE.lock" "$TMP/pytorch.yaml.lock"
RECIPE="$TMP/pytorch.yaml"
sb lock "$RECIPE" --catalog "$SB_SOURCE_DIR/layers" --store "$S" >"$TMP/lock.out" 2>&1 || fail "lock: $(tail -20 "$TMP/lock.out")"
start=$(date +%s.%N)
sb build "$RECIPE" --locked --catalog "$SB_SOURCE_DIR/layers" -o "$TMP/out2" --store "$S" --sbom >"$TMP/build2.out" 2>&1 ||
  fail "rebuild: $(tail -20 "$TMP/build2.out")"
warm=$(python3 -c "import time; print(round(time.time() - $start, 2))")
grep -q " built" "$TMP/build2.out" || true
python3 - "$TMP/build2.out" <<'PY' || fail "the rebuild built layers: $(cat "$TMP/build2.out")"
import re, sys
text = open(sys.argv[1]).read()
built = [int(n) for n in re.findall(r"(\d+) built", text)]
assert built and all(n == 0 for n in built), built
PY
cmp "$TMP/index-built.json" "$TMP/out2/index.json" || fail "the rebuild's index.json (the SBOMs' artifacts in it) differs"
say "no-change rebuild: $warm s (cold $cold s)"
pass
