#!/usr/bin/env bash
# Recipe tests and the gate of `build --push`, with the real registry (distribution 2.8,
# which has no referrers API). Images of a static busybox (a copy layer) carry tests:
#   - `build --verify` runs them in the sandbox: a passing test (with ${stack} expanded),
#     a test that must exit 3, a `gpu: true` test reported skipped (JSON and JUnit);
#   - with --json, every line `build --push-to` and `test` print on stdout is a
#     JSON object, the report a "verify" event (not the text table);
#   - `stackbuild test LAYOUT:TAG` runs the tests the image recorded, `test RECIPE` finds
#     the image in the layout the build wrote;
#   - a failing test blocks `--push-to`: exit 1 naming the image and the test, nothing in
#     the registry; `--no-verify` pushes it anyway;
#   - after a verified push, the report is an artifact whose subject is the image, found
#     through the referrers tag (sha256-<hex>); `test REF` pulls it and runs its tests,
#     and `test --attach` adds another report.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/sandbox_lib.sh"
source "$HERE/registry/lib.sh"
require_sandbox
require_registry
cd "$TMP"

make_busybox_root base
recipe() {  # $1: stack, $2: the extra test lines
  cat >"$1.yaml" <<EOF
stack: $1
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}], preserve_modes: true}
tags: ["$1:1"]
tests:
  - {name: greets, run: "echo hello from \${stack}", expect: "hello from $1"}
  - {name: exits-3, run: "exit 3", exit: 3, timeout: 30}
  - {name: on-the-gpu, run: "nvidia-smi", gpu: true}
$2
EOF
}
recipe good ""
recipe bad '  - {name: broken, run: "echo about to fail; exit 1"}'

check "build --verify runs the recipe's tests in the sandbox; the GPU test is skipped, never passed"
expect_ok build sb build good.yaml -o "$TMP/L" --store "$STORE" --verify --report r.json --junit j.xml
python3 - <<'PY' || { show_output build; fail "the report of build --verify is wrong"; }
import json, xml.etree.ElementTree as ET
r = json.load(open("r.json"))
res = {t["name"]: t for t in r["results"]}
assert res["recipe: greets"]["outcome"] == "passed", res
assert res["recipe: exits-3"]["outcome"] == "passed", res
gpu = res["recipe: on-the-gpu"]
assert gpu["outcome"] == "skipped" and gpu["message"] == "no NVIDIA GPU on this host", gpu
assert r["summary"]["failed"] == 0 and r["summary"]["skipped"] >= 1, r["summary"]
suite = ET.parse("j.xml").getroot().find("testsuite")
assert int(suite.get("skipped")) == r["summary"]["skipped"] and int(suite.get("failures")) == 0
case = [c for c in suite.findall("testcase") if c.get("name") == "recipe: on-the-gpu"][0]
assert case.find("skipped") is not None and case.find("failure") is None
PY
[[ -e /dev/nvidiactl ]] && say "note: this host has an NVIDIA device node; the skip check assumed none"

check "the image records its tests: 'test LAYOUT:TAG' runs them, 'test RECIPE' finds the image"
expect_ok tlayout sb test "$TMP/L:1" --store "$STORE"
grep -Eq "^passed +recipe: greets" "$TMP/tlayout.out" || { show_output tlayout; fail "test LAYOUT did not run the recorded test"; }
grep -Eq "^skipped +recipe: on-the-gpu +no NVIDIA GPU on this host" "$TMP/tlayout.out" || { show_output tlayout; fail "no skipped GPU test"; }
expect_ok trecipe sb test good.yaml -o "$TMP/L" --store "$STORE"
grep -Eq "^passed +recipe: exits-3" "$TMP/trecipe.out" || { show_output trecipe; fail "test RECIPE did not run the tests"; }

start_registry reg
R="127.0.0.1:$REG_PORT"
check "--json: every line on stdout is a JSON object, for build --json --push-to and test --json"
expect_ok jbuild "$SB" build good.yaml -o "$TMP/J" --store "$STORE" --push-to "$R/json:1" --json
expect_ok jtest "$SB" test "$TMP/L:1" --store "$STORE" --json
python3 - "$TMP/jbuild.out" "$TMP/jtest.out" <<'PY' || fail "stdout of --json is not JSON lines (above)"
import json, sys
for f in sys.argv[1:]:
    verified = 0
    for n, line in enumerate(open(f), 1):
        try:
            j = json.loads(line)
            assert isinstance(j, dict)
        except Exception:
            sys.exit(f"{f}:{n}: not a JSON object: {line!r}")
        if j.get("event") == "verify" and j.get("report", {}).get("image"):
            verified += 1
    if not verified:
        sys.exit(f"{f}: no verify event with the report")
PY

check "a failing test blocks build --push-to: exit 1 naming the image and the test, nothing pushed"
expect_rc 1 blocked sb build bad.yaml -o "$TMP/B" --store "$STORE" --push-to "$R/bad:1"
grep -q "not pushing" "$TMP/blocked.err" || { show_output blocked; fail "no 'not pushing' message"; }
grep -q "bad:1: recipe: broken: exited with status 1, expected 0" "$TMP/blocked.err" ||
  { show_output blocked; fail "the message does not name the image and the test"; }
grep -Eq "^failed +recipe: broken" "$TMP/blocked.out" || { show_output blocked; fail "no report table"; }
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$R/v2/bad/tags/list")
[[ "$code" == 404 ]] || fail "the registry has repository bad after a blocked push (HTTP $code)"

check "--no-verify pushes anyway"
expect_ok noverify sb build bad.yaml -o "$TMP/B" --store "$STORE" --push-to "$R/bad:1" --no-verify
BAD=$(manifest_digest "$TMP/B" 1)
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Accept: application/vnd.oci.image.manifest.v1+json" \
  "http://$R/v2/bad/manifests/1")
[[ "$code" == 200 ]] || fail "--no-verify did not push (HTTP $code)"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$R/v2/bad/manifests/sha256-$BAD")
[[ "$code" == 404 ]] || fail "an unverified push attached a report"

check "a verified push attaches the report, found through the referrers tag"
expect_ok push sb build good.yaml -o "$TMP/L" --store "$STORE" --push-to "$R/good:1"
GOOD=$(manifest_digest "$TMP/L" 1)
grep -q "attached to $R/good@sha256:$GOOD" "$TMP/push.err" || { show_output push; fail "no attach message"; }
referrers() {
  curl -sf -H "Accept: application/vnd.oci.image.index.v1+json" "http://$R/v2/good/manifests/sha256-$GOOD" >"$TMP/index.json" ||
    fail "no referrers tag sha256-$GOOD"
}
referrers
python3 - "$TMP/index.json" "$R" "$GOOD" <<'PY' || fail "the referrers index or the artifact is wrong"
import json, sys, urllib.request
idx, reg, subject = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
assert idx["mediaType"] == "application/vnd.oci.image.index.v1+json", idx
reports = [m for m in idx["manifests"] if m.get("artifactType") == "application/vnd.stackbuild.test-report.v1+json"]
assert len(reports) == 1, idx
def get(path, accept):
    req = urllib.request.Request(f"http://{reg}/v2/good/{path}", headers={"Accept": accept})
    return urllib.request.urlopen(req).read()
m = json.loads(get("manifests/" + reports[0]["digest"], "application/vnd.oci.image.manifest.v1+json"))
assert m["subject"]["digest"] == "sha256:" + subject, m
assert m["artifactType"] == "application/vnd.stackbuild.test-report.v1+json"
report = json.loads(get("blobs/" + m["layers"][0]["digest"], "*/*"))
assert report["image"] == "good:1" and report["summary"]["failed"] == 0, report
names = {t["name"]: t["outcome"] for t in report["results"]}
assert names["recipe: greets"] == "passed" and names["recipe: on-the-gpu"] == "skipped", names
PY

check "test REGISTRY/REPO:TAG pulls the image and runs the tests it recorded"
expect_ok tref sb test "$R/good:1" --store "$TMP/store2"
grep -Eq "^passed +recipe: greets" "$TMP/tref.out" || { show_output tref; fail "test REF did not run the recorded test"; }

check "test --attach adds its report to the same referrers tag"
sleep 1  # another report (its times differ), so another artifact
expect_ok attach sb test "$TMP/L:1" --store "$STORE" --attach "$R/good"
referrers
n=$(json "$TMP/index.json" 'len(j["manifests"])')
[[ "$n" -ge 2 ]] || { show_output attach; fail "the referrers index lists $n artifacts after a second attach"; }
pass
