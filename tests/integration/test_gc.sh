#!/usr/bin/env bash
# stackbuild gc on a real store: two small images built, one tested (an unpacked
# root), an orphan blob and a temp file planted. --dry-run removes nothing; gc removes
# the root, the orphan and the temp file and keeps every layer cached (a rebuild builds
# nothing and gives the same digests); --max-size evicts the layers (a rebuild builds
# them again, with the same digests); gc is refused while a build uses the store, names
# its pid, and waits for it with --wait; bad flag values are refused.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool flock sha256sum
cd "$TMP"

mkdir -p in/a in/b in/big
echo "alpha" >in/a/a.txt
echo "beta" >in/b/b.txt
head -c 200000 /dev/urandom >in/a/data.bin
for n in a b; do
  cat >"$n.yaml" <<YAML
stack: gc$n
source_date_epoch: 1704067200
layers:
  - name: base
    copy:
      - {src: in/a/a.txt, dst: /etc/a.txt}
  - name: app
    copy:
      - {src: in/$n/, dst: /opt/$n/}
tags: ["gc$n:1"]
YAML
done

built_cached() {  # built_cached NAME BUILT CACHED: the build's summary line says so
  grep -qE "\\($2 built, $3 from the cache\\)" "$TMP/$1.out" "$TMP/$1.err" ||
    { show_output "$1"; fail "build $1 did not report ($2 built, $3 from the cache)"; }
}
gc_json() {  # gc_json NAME ARGS...: runs gc --json, output in $TMP/NAME.out
  expect_ok "$1" "$SB" gc --store "$STORE" --json "${@:2}"
}

check "two images build into the store, and stackbuild test unpacks a root"
expect_ok build_a sb build a.yaml -o out-a --store "$STORE"
expect_ok build_b sb build b.yaml -o out-b --store "$STORE"
built_cached build_b 1 1  # the base layer is shared
expect_ok test_a sb test out-a:1 --store "$STORE"
[[ $(find "$STORE/roots" -mindepth 1 -maxdepth 1 -type d | wc -l) -eq 1 ]] || fail "stackbuild test left no root"
orphan=$(printf 'an orphan' | sha256sum | cut -d' ' -f1)
printf 'an orphan' >"$STORE/blobs/sha256/$orphan"
echo half >"$STORE/tmp/partial-0"
listing() { (cd "$STORE" && find . -path ./locks -prune -o -print | sort); }
before=$(listing)

check "gc --dry-run reports the root, the orphan and the temp file, and removes nothing"
gc_json dry --dry-run
python3 - "$TMP/dry.out" <<'PY' || fail "gc --dry-run reported the wrong things: $(cat "$TMP/dry.out")"
import json, sys
j = json.load(open(sys.argv[1]))
r = j["removed"]
assert j["dry_run"] is True
assert r["roots"]["count"] == 1 and r["roots"]["bytes"] > 0, r
assert r["blobs"]["count"] == 1, r
assert r["tmp"]["count"] == 1, r
assert r["records"]["count"] == 0, r
assert j["freed_bytes"] == sum(v["bytes"] for v in r.values())
assert j["after_bytes"] == j["before_bytes"] - j["freed_bytes"]
PY
[[ "$(listing)" == "$before" ]] || fail "gc --dry-run changed the store: $(diff <(echo "$before") <(listing))"
expect_ok dry_text "$SB" gc --store "$STORE" --dry-run
grep -q '^would remove:' "$TMP/dry_text.out" || fail "no 'would remove:' in the text output: $(cat "$TMP/dry_text.out")"
grep -qE '^  roots +1 ' "$TMP/dry_text.out" || fail "the text output lacks the roots line: $(cat "$TMP/dry_text.out")"
grep -q '^would free ' "$TMP/dry_text.out" || fail "the text output lacks the total"

check "gc removes the root, the orphan and the temp file; every layer stays cached"
gc_json gc1
python3 - "$TMP/gc1.out" <<'PY' || fail "gc reported the wrong things: $(cat "$TMP/gc1.out")"
import json, sys
j = json.load(open(sys.argv[1]))
r = j["removed"]
assert j["dry_run"] is False
assert (r["roots"]["count"], r["blobs"]["count"], r["tmp"]["count"], r["records"]["count"]) == (1, 1, 1, 0), r
PY
[[ -z "$(find "$STORE/roots" -mindepth 1)" ]] || fail "a root is left: $(ls "$STORE/roots")"
[[ ! -e "$STORE/blobs/sha256/$orphan" ]] || fail "the orphan blob is left"
[[ -z "$(store_temps "$STORE")" ]] || fail "temp files are left: $(store_temps "$STORE")"
verify_blobs "$STORE"
verify_blobs out-a  # the layout's blobs are hard links: gc leaves them whole
gc_json gc_again
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["freed_bytes"] == 0 and all(v["count"] == 0 for k, v in j["removed"].items() if k != "locks"), j' \
  "$TMP/gc_again.out" || fail "a second gc found more: $(cat "$TMP/gc_again.out")"
for n in a b; do
  expect_ok "rebuild_$n" sb build "$n.yaml" -o "re-$n" --store "$STORE"
  built_cached "rebuild_$n" 0 2
  diff <(image_digests "out-$n" 1) <(image_digests "re-$n" 1) || fail "the rebuild of $n after gc gives other digests"
done

check "gc --max-size 1K evicts the layers; a rebuild builds them again with the same digests"
gc_json gc_small --max-size 1K
python3 - "$TMP/gc_small.out" <<'PY' || fail "gc --max-size reported the wrong things: $(cat "$TMP/gc_small.out")"
import json, sys
j = json.load(open(sys.argv[1]))
r = j["removed"]
assert r["records"]["count"] == 3 and r["blobs"]["count"] == 3, r
assert j["after_bytes"] <= 1024, j
PY
[[ -z "$(find "$STORE/refs" -type f)" ]] || fail "records are left: $(find "$STORE/refs" -type f)"
expect_ok rebuild_small sb build b.yaml -o out-c --store "$STORE"
built_cached rebuild_small 2 0
diff <(image_digests out-b 1) <(image_digests out-c 1) || fail "the rebuild after eviction gives other digests"

check "gc is refused while another process holds the store, and --wait waits for it"
flock -s "$STORE/store.lock" sleep 3 &
holder=$!
for _ in $(seq 100); do flock -n -x "$STORE/store.lock" true 2>/dev/null || break; sleep 0.02; done
expect_rc 1 busy "$SB" gc --store "$STORE"
grep -q "is in use by another stackbuild (pid $holder)" "$TMP/busy.err" ||
  { show_output busy; fail "the refusal does not name the process holding the store"; }
grep -q -- "--wait" "$TMP/busy.err" || fail "the refusal does not mention --wait"
expect_ok waited "$SB" gc --store "$STORE" --wait
kill -0 "$holder" 2>/dev/null && fail "gc --wait returned while the store was still held"
wait "$holder" || true

check "a running build holds the store: gc refuses, naming the build"
head -c $((48 << 20)) /dev/urandom >in/big/big.bin
cat >big.yaml <<'YAML'
stack: gcbig
source_date_epoch: 1704067200
layers:
  - name: big
    copy:
      - {src: in/big/, dst: /opt/big/}
tags: ["gcbig:1"]
YAML
# On a loaded machine the build may let go of the store before gc asks: then
# gc rightly runs, and the race is tried again; five times without one
# refusal fail (gc would be ignoring the lock).
refused=""
for attempt in 1 2 3 4 5; do
  rm -rf out-big
  "$SB" build big.yaml -o out-big --store "$STORE" --progress plain >big.out 2>&1 &
  build=$!
  seen=""
  for _ in $(seq 1000); do
    if ! flock -n -x "$STORE/store.lock" true 2>/dev/null; then seen=1; break; fi
    kill -0 "$build" 2>/dev/null || break
    sleep 0.01
  done
  [[ -n "$seen" ]] || { wait "$build" || { cat big.out; fail "the build failed"; }; continue; }
  run_capture busy_build "$SB" gc --store "$STORE"
  if [[ $RC == 1 ]]; then
    grep -q "in use by another stackbuild (pid $build)" "$TMP/busy_build.err" ||
      { show_output busy_build; fail "the refusal does not name the build's pid $build"; }
    refused=1
  elif [[ $RC != 0 ]]; then
    show_output busy_build; fail "gc exited $RC, neither ran nor refused"
  fi
  wait "$build" || { cat big.out; fail "the build failed"; }
  [[ -n $refused ]] && break
  say "attempt $attempt: the build ended before gc asked; again"
done
[[ -n $refused ]] || fail "in 5 attempts gc never met the build holding the store"

check "bad flag values are refused with exit 2"
expect_rc 2 bad_size "$SB" gc --store "$STORE" --max-size lots
grep -q "max-size wants a size" "$TMP/bad_size.err" || fail "no clear --max-size error: $(cat "$TMP/bad_size.err")"
expect_rc 2 bad_age "$SB" gc --store "$STORE" --older-than 7x
grep -q "older-than wants a duration" "$TMP/bad_age.err" || fail "no clear --older-than error: $(cat "$TMP/bad_age.err")"
expect_rc 2 bad_mix "$SB" gc --store "$STORE" --all --roots
expect_rc 2 bad_arg "$SB" gc --store "$STORE" extra
mkdir notastore
expect_rc 1 not_store "$SB" gc --store notastore
grep -q "is not a stackbuild store" "$TMP/not_store.err" || fail "gc on a plain folder: $(cat "$TMP/not_store.err")"

check "gc --older-than runs, and --all empties the store"
expect_ok old "$SB" gc --store "$STORE" --older-than 1s --dry-run
expect_ok everything "$SB" gc --store "$STORE" --all
[[ -z "$(find "$STORE/blobs/sha256" "$STORE/refs" -type f)" ]] || fail "gc --all left blobs or records"
verify_blobs out-big

pass
