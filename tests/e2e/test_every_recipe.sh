#!/usr/bin/env bash
# Every recipe and example these machines build (the rows of the README's table
# that say "yes", checked against the repository by test_readme_recipes): one
# point of each (the plan's first) built from its committed lockfile where it
# has one, and `stackbuild test` run on the image (static checks and the
# recipe's tests pass; GPU tests are skipped without a GPU, never passed).
# The framework recipes added for issue 33 (SB_E2E_TWICE, default jax and
# tensorflow) are built a second time with another empty store and must give
# the same manifest digest; for those the cold build time and the image size
# are printed. SB_E2E_RECIPES="FILE..." runs a subset of the files.
# Label e2e: downloads ~12 GB (SB_E2E_STORE=DIR keeps one store's between runs;
# the second builds always start empty) and needs ~25 GB of disk; not in the
# default run.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
[[ $(id -u) == 0 ]] || skip "the tests run in the build sandbox, which needs root here"
S=${SB_E2E_STORE:-$STORE}
twice=" ${SB_E2E_TWICE:-jax tensorflow} "
avail=$(df -Pk "$TMP" | awk 'NR==2 {print $4}')
(( avail > ${SB_E2E_NEED_GB:-25} * 1024 * 1024 )) || skip "needs ${SB_E2E_NEED_GB:-25} GB free in $TMP (SB_E2E_NEED_GB)"

check "the README's table names the files built here"
mapfile -t files < <(python3 - "$SB_SOURCE_DIR/README.md" <<'PY'
import re, sys
text = open(sys.argv[1]).read().split("## Every recipe and example, and whether these machines build it", 1)[1]
for row in text.split("\n## ", 1)[0].splitlines():
    cells = [c.strip() for c in row.strip("|").split("|")]
    if row.startswith("| `") and cells[-1].startswith("yes"):
        print("\n".join(re.findall(r"`((?:recipes|examples)/[^`]+\.yaml)`", cells[0])))
PY
)
say "built here: ${files[*]}"
((${#files[@]} >= 6)) || fail "only ${#files[@]} files say yes"
if [[ -n ${SB_E2E_RECIPES:-} ]]; then  # a subset, e.g. SB_E2E_RECIPES="recipes/jax.yaml examples/hello.yaml"
  for f in $SB_E2E_RECIPES; do [[ " ${files[*]} " == *" $f "* ]] || fail "SB_E2E_RECIPES: $f is not built here"; done
  read -r -a files <<<"$SB_E2E_RECIPES"
fi

# build NAME RECIPE STORE OUT: the plan's first point, --locked where a lock is committed.
build_point() {
  local name=$1 recipe=$2 store=$3 out=$4 only=() locked=()
  sb plan "$recipe" --json >"$TMP/$name.plan.json" 2>/dev/null || fail "plan $recipe"
  mapfile -t only < <(json "$TMP/$name.plan.json" \
    '"\n".join("--only\n%s=%s" % (k, v) for k, v in j["points"][0]["matrix"].items() if isinstance(v, str))')
  [[ ${only[0]:-} ]] || only=()  # no matrix: the one point
  [[ -f $recipe.lock ]] && locked=(--locked)
  sb build "$recipe" "${only[@]}" "${locked[@]}" -o "$out" --store "$store" >"$TMP/$name.build.out" 2>&1 ||
    fail "build $recipe ${only[*]}: $(tail -30 "$TMP/$name.build.out")"
}

for f in "${files[@]}"; do
  name=$(basename "$f" .yaml)
  recipe=$SB_SOURCE_DIR/$f
  check "$f: one point builds$([[ -f $recipe.lock ]] && echo ", from its lockfile")"
  start=$(date +%s.%N)
  build_point "$name" "$recipe" "$S" "$TMP/out-$name"
  secs=$(python3 -c "import time; print(round(time.time() - $start, 1))")
  ref=$(json "$TMP/$name.plan.json" 'j["points"][0]["tags"][0].split(":", 1)[1]')
  digest=$(manifest_digest "$TMP/out-$name" "$ref") || fail "no $ref in the layout"
  size=$(python3 - "$TMP/out-$name" "$digest" <<'PY'
import json, os, sys
d, digest = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(d, "blobs", "sha256", digest)))
print(f"{sum(l['size'] for l in m['layers']) / 1e9:.2f} GB compressed, {len(m['layers'])} layers")
PY
)
  say "$f ($ref): sha256:$digest, $size, built in $secs s"

  check "$f: stackbuild test of the image: nothing fails"
  had_root=no
  [[ -d $S/roots/$digest ]] && had_root=yes
  rc=0
  sb test "$TMP/out-$name:$ref" --store "$S" --report "$TMP/$name.report.json" >"$TMP/$name.test.out" 2>&1 || rc=$?
  [[ $had_root == no ]] && rm -rf "$S/roots/$digest"
  (( rc == 0 )) || fail "test $f: $(tail -30 "$TMP/$name.test.out")"
  python3 - "$TMP/$name.report.json" <<'PY' || fail "report of $f"
import json, sys
doc = json.load(open(sys.argv[1]))
reports = doc if isinstance(doc, list) else doc.get("reports", [doc])
by = {}
for rep in reports:
    for r in rep["results"]:
        by.setdefault(r["outcome"], []).append(r["name"])
assert not by.get("failed"), by
assert by.get("passed"), by
# No GPU here: a GPU test is skipped, never passed.
import os
if not os.path.exists("/dev/nvidiactl"):
    assert not [n for n in by.get("passed", []) if n.startswith("gpu:")], by
print({k: len(v) for k, v in by.items()})
PY

  if [[ $twice == *" $name "* ]]; then
    check "$f: a second build from another empty store gives the same image, bit for bit"
    start=$(date +%s.%N)
    build_point "$name-2" "$recipe" "$TMP/store-2" "$TMP/out-$name-2"
    cold=$(python3 -c "import time; print(round(time.time() - $start, 1))")
    again=$(manifest_digest "$TMP/out-$name-2" "$ref")
    [[ $again == "$digest" ]] || fail "$f: sha256:$digest, then sha256:$again"
    rm -rf "$TMP/store-2" "$TMP/out-$name-2"
    say "$f: cold build (empty store) $cold s, $size; both builds sha256:$digest"
  fi
  rm -rf "$TMP/out-$name"
done
pass
