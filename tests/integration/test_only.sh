#!/usr/bin/env bash
# One way to choose points (issue 34): `--only KEY=VALUE` chooses the same
# points in plan, lock, build, test and notes; `--set` of a key that only
# include: entries give chooses those entries (or sets it in every one)
# instead of making a half-defined point. Local files only: no network.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

R="$TMP/recipe"
mkdir -p "$R"
printf 'a\n' >"$R/a.txt"
printf 'b\n' >"$R/b.txt"
cat >"$R/r.yaml" <<'YAML'
stack: mx
source_date_epoch: 1700000000
matrix:
  flavor: [a, b]
layers:
  - {name: flavor, copy: [{src: "${flavor}.txt", dst: "/opt/flavor.txt"}]}
tags: ["mx:${flavor}"]
YAML

check "plan --only shows the chosen points; a value no point has is a usage error naming the values"
expect_ok plan sb plan "$R/r.yaml" --only flavor=b
grep -q "1 point" "$TMP/plan.out" && grep -q "mx:b" "$TMP/plan.out" && ! grep -q "mx:a" "$TMP/plan.out" ||
  { show_output plan; fail "plan --only flavor=b did not show only mx:b"; }
expect_rc 2 plan_bad sb plan "$R/r.yaml" --only flavor=c
grep -q "flavor is one of: a, b" "$TMP/plan_bad.err" || { show_output plan_bad; fail "not the --only error"; }

check "build and lock every point; lock --only keeps the other point's entry"
expect_ok build sb build "$R/r.yaml" -o "$TMP/out" --store "$STORE"
expect_ok lock sb lock "$R/r.yaml" --store "$STORE"
expect_ok lock_only sb lock "$R/r.yaml" --only flavor=a --store "$STORE"
grep -q "the lock pins what it pinned before" "$TMP/lock_only.err" || { show_output lock_only; fail "lock --only changed the lock"; }
expect_ok lock_check sb lock "$R/r.yaml" --check

check "test RECIPE --only tests the chosen point's image only; --only with a layout is refused"
expect_ok test_only sb test "$R/r.yaml" --only flavor=b -o "$TMP/out" --store "$STORE" --report "$TMP/report.json"
json "$TMP/report.json" 'len(j) if isinstance(j, list) else 1' >"$TMP/n" || fail "no report"
[[ $(cat "$TMP/n") == 1 ]] || fail "test --only flavor=b tested $(cat "$TMP/n") images"
image=$(json "$TMP/report.json" '(j[0] if isinstance(j, list) else j)["image"]')
[[ $image == "$TMP/out:b" ]] || fail "test --only flavor=b tested $image"
expect_rc 2 test_layout sb test "$TMP/out:mx_a" --only flavor=a --store "$STORE"
grep -q "chooses points of a RECIPE" "$TMP/test_layout.err" || { show_output test_layout; fail "not the usage error"; }

check "notes --only writes the chosen point's image only"
expect_ok notes sb notes "$TMP/out" --only flavor=a --store "$STORE"
grep -q '`mx:a`' "$TMP/notes.out" && ! grep -q '`mx:b`' "$TMP/notes.out" || { show_output notes; fail "notes --only flavor=a"; }
expect_rc 2 notes_bad sb notes "$TMP/out" --only flavor=z --store "$STORE"
grep -q "flavor=a" "$TMP/notes_bad.err" || { show_output notes_bad; fail "notes --only did not list the points there are"; }

check "--set of a key only include: entries give: chosen entries, or set in every entry"
cat >"$R/i.yaml" <<'YAML'
stack: inc
source_date_epoch: 1700000000
matrix:
  include:
    - {flavor: a, size: small}
    - {flavor: b, size: large}
layers:
  - {name: flavor, copy: [{src: "${flavor}.txt", dst: "/opt/${size}.txt"}]}
tags: ["inc:${flavor}-${size}"]
YAML
expect_ok set_choose sb plan "$R/i.yaml" --set flavor=b
grep -q "1 point" "$TMP/set_choose.out" && grep -q "inc:b-large" "$TMP/set_choose.out" ||
  { show_output set_choose; fail "--set flavor=b did not choose the b entry"; }
expect_ok set_both sb build "$R/i.yaml" --set flavor=a --set size=small -o "$TMP/out-i" --store "$STORE"
grep -q "inc:a-small" "$TMP/set_both.err" "$TMP/set_both.out" || { show_output set_both; fail "--set flavor=a --set size=small"; }
expect_ok set_every sb plan "$R/i.yaml" --set size=huge
grep -q "inc:a-huge" "$TMP/set_every.out" && grep -q "inc:b-huge" "$TMP/set_every.out" ||
  { show_output set_every; fail "--set size=huge was not set in every entry"; }
pass
