#!/usr/bin/env bash
# Issue 9: two builds of the same recipe with the same lockfile, on "different
# machines and days", give the same manifest digest for every matrix point.
#
# Build A: `build --locked` from the recipe's committed lockfile (recipes that
#   ship are locked; `stackbuild lock` first for one that has none), with the
#   usual store (SB_E2E_STORE, or a fresh one).
# Build B, made to differ from A in everything a machine or a day changes:
#   - a store of its own, empty: every .deb and wheel is downloaded again and
#     every layer built again (nothing is shared with A);
#   - the clock 40 days ahead (libfaketime), another time zone and locale;
#   - another host name (a new UTS namespace), umask 077, another directory
#     holding the recipe and lockfile, --threads 1 and --jobs 1.
# Then every point's manifest digest, the matrix index's, and index.json byte
# for byte must agree.
#
# Across real machines: SB_REPRO_SAVE=DIR keeps A's lockfile and digests;
# SB_REPRO_FROM=DIR (a DIR saved on another machine or day) makes build B use
# that lockfile and compares against those digests instead of A's.
#
# SB_REPRO_RECIPE picks the recipe (default recipes/pytorch.yaml, ~8 GB of
# downloads for build B and ~30 GB of disk; recipes/cuda-base-wheels.yaml is a
# lighter one). Label e2e: not in the default run.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
require_tool faketime unshare hostname
[[ $(id -u) == 0 ]] || skip "a new UTS namespace and the build sandbox need root here"
RECIPE=${SB_REPRO_RECIPE:-$SB_SOURCE_DIR/recipes/pytorch.yaml}
[[ $RECIPE == /* ]] || RECIPE="$SB_SOURCE_DIR/$RECIPE"
name=$(basename "$RECIPE")
S=${SB_E2E_STORE:-$STORE}

# Every tagged manifest of a layout as "tag digest" lines, sorted.
digests() {
  python3 - "$1" <<'PY'
import json, sys
idx = json.load(open(sys.argv[1] + "/index.json"))
for m in sorted(idx["manifests"], key=lambda m: m["annotations"]["org.opencontainers.image.ref.name"]):
    print(m["annotations"]["org.opencontainers.image.ref.name"], m["digest"])
PY
}

# A recipe directory of its own: the recipe, what it copies, its lockfile.
stage() {
  mkdir -p "$1"
  cp -r "$(dirname "$RECIPE")"/. "$1"/
}

check "build A: build --locked from the committed lockfile"
stage "$TMP/a"
if [[ ! -f "$TMP/a/$name.lock" ]]; then
  sb lock "$TMP/a/$name" --catalog "$SB_SOURCE_DIR/layers" --store "$S" >"$TMP/lock.out" 2>&1 ||
    fail "lock: $(tail -20 "$TMP/lock.out")"
fi
lockfile="$TMP/a/$name.lock"
sb build "$TMP/a/$name" --locked --catalog "$SB_SOURCE_DIR/layers" -o "$TMP/outA" --store "$S" \
  >"$TMP/a.out" 2>&1 || fail "build A: $(tail -30 "$TMP/a.out")"
digests "$TMP/outA" >"$TMP/a.digests"
cat "$TMP/a.digests"
if [[ -n ${SB_REPRO_SAVE:-} ]]; then
  mkdir -p "$SB_REPRO_SAVE"
  cp "$lockfile" "$TMP/a.digests" "$SB_REPRO_SAVE"/
  { date -u +%FT%TZ; hostname; } >"$SB_REPRO_SAVE/made-on"
  say "saved the lockfile and digests in $SB_REPRO_SAVE"
fi

want="$TMP/a.digests"
stage "$TMP/elsewhere/b"
cp "$lockfile" "$TMP/elsewhere/b/"
if [[ -n ${SB_REPRO_FROM:-} ]]; then
  cp "$SB_REPRO_FROM"/*.lock "$TMP/elsewhere/b/"
  want="$SB_REPRO_FROM/a.digests"
  say "build B uses the lockfile made on $(tr '\n' ' ' <"$SB_REPRO_FROM/made-on")"
fi

check "build B: empty store, clock +40 days, other TZ, locale, host name, umask, directory, threads"
mkdir -p "$TMP/storeB"
start=$(date +%s)
(
  cd "$TMP/elsewhere"
  umask 077
  export TZ=Pacific/Kiritimati LC_ALL=C.UTF-8 LANG=de_DE.UTF-8 FAKETIME_DONT_FAKE_MONOTONIC=1
  unshare --uts -- bash -c '
    hostname repro-other-machine
    exec faketime -f "+40d" "$@"' _ \
    "$SB" build "b/$name" --locked --catalog "$SB_SOURCE_DIR/layers" -o "$TMP/outB" --store "$TMP/storeB" \
    --threads 1 --jobs 1 --progress plain
) >"$TMP/b.out" 2>&1 || fail "build B: $(tail -30 "$TMP/b.out")"
say "build B took $(($(date +%s) - start)) s"
# B's store started empty, so every download and layer is B's own (points of
# B may share layers with each other, as they do in any build).
grep -q "repro-other-machine" /proc/sys/kernel/hostname && fail "the host name leaked out of the namespace"
digests "$TMP/outB" >"$TMP/b.digests"

check "every point's manifest digest and the index agree"
diff "$want" "$TMP/b.digests" || fail "the digests differ (above: A's, then B's)"
[[ -n ${SB_REPRO_FROM:-} ]] || cmp "$TMP/outA/index.json" "$TMP/outB/index.json" || fail "index.json differs"
say "$(wc -l <"$TMP/b.digests") manifests identical: $(tr '\n' ' ' <"$TMP/b.digests")"
pass
