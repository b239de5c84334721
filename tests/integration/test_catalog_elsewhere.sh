#!/usr/bin/env bash
# A catalog that is not beside the recipe, given as `--catalog DIR` or
# STACKBUILD_CATALOG, is the one every stage reads: the plan and the layers
# alike (issue 32). The catalog names a component "greet" (an apt package of a
# fixture repository on 127.0.0.1) and "torchy" (a wheel of
# tests/integration/pip_index.py's index, and a git source kept beside it). A
# recipe with nothing beside it builds (`from: apt`, `from: wheel` and
# `keep_source:` each take their records from that catalog), the same with the
# environment variable and with `lock` + `build --locked`; a recipe beside a
# decoy `layers/` whose records name other packages, wheels and sources builds
# the same image, not the decoy's.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=apt_lib.sh
source "$HERE/apt_lib.sh"
require_tool git dpkg-deb gzip sha256sum
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
glibc=$(ldd --version | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')
[[ -n $glibc ]] || skip "cannot tell this machine's glibc version"

# The wheels, and an unsigned apt repository (the recipe marks it trusted).
python3 "$HERE/pip_index.py" "$TMP/index" || fail "building the index"
serve_dir "$TMP/index"
export STACKBUILD_PIP_INDEX_URL="$SERVED_URL/simple" PIP_CONFIG_FILE=/dev/null
www="$TMP/www"
mkdeb main libgreet 1.0 "" usr/lib/libgreet.so.1
mkdeb main curlish 1.0 "" usr/bin/curlish
publish main unsigned
serve_dir "$www"
apt_url="$SERVED_URL/main"

# The sources: torchy's at v2.0, and the decoy's.
gitc() { git -C "$1" -c user.name=t -c user.email=t@example.invalid "${@:2}"; }
repo() {  # repo DIR FILE: a repository holding FILE, tagged v2.0
  mkdir -p "$1" && printf '%s\n' "$2" >"$1/$2"
  git init -q "$1" && gitc "$1" add -A && gitc "$1" commit -qm v2.0 && gitc "$1" tag v2.0
}
repo "$TMP/torchy-src" REAL
repo "$TMP/decoy-src" DECOY

catalog() {  # catalog DIR APT-PACKAGE WHEEL GIT-REPOSITORY
  mkdir -p "$1"
  cat >"$1/greet.yaml" <<EOF
component: greet
versions:
  - {version: "1.0", sources: {apt: [$2]}}
EOF
  cat >"$1/torchy.yaml" <<EOF
component: torchy
versions:
  - version: "2.0"
    sources: {pip: ["$3"], git: {url: "file://$4", ref: v2.0}}
EOF
}
cat_dir="$TMP/elsewhere/catalog"  # no layers/ in its name, nor beside any recipe
catalog "$cat_dir" libgreet "torchy==2.0" "$TMP/torchy-src"
catalog "$TMP/decoy/layers" curlish "torchy==1.0" "$TMP/decoy-src"

recipe() {  # recipe FILE
  mkdir -p "$(dirname "$1")"
  cat >"$1" <<EOF
stack: elsewhere
source_date_epoch: 1700000000
platform: {python: "$py", glibc: "$glibc"}
repositories: [{url: "$apt_url", suites: [test], trusted: true}]
layers:
  - {name: greet, use: greet, version: "1.0", from: apt}
  - {name: torchy, use: torchy, version: "2.0", from: wheel, keep_source: /opt/torchy}
tags: ["elsewhere:t"]
EOF
}
recipe "$TMP/bare/r.yaml"
recipe "$TMP/decoy/r.yaml"

# has_image NAME LAYOUT: the image holds libgreet, torchy 2.0's wheel and torchy's
# own tree, and nothing the decoy names.
has_image() {
  local root="$TMP/root-$1"
  expect_ok "unpack-$1" sb unpack "$2:t" "$root" --store "$STORE"
  [[ -f $root/usr/lib/libgreet.so.1 ]] || fail "$1: libgreet (the catalog's apt package) is not in the image"
  [[ ! -e $root/usr/bin/curlish ]] || fail "$1: the decoy catalog's apt package is in the image"
  find "$root" -path '*-packages/torchy-2.0.dist-info' | grep -q . ||
    fail "$1: torchy 2.0 (the catalog's wheel) is not in the image: $(find "$root" -name 'torchy-*' | head)"
  [[ -f $root/opt/torchy/REAL && ! -e $root/opt/torchy/DECOY ]] ||
    fail "$1: /opt/torchy is not the catalog's source: $(ls "$root/opt/torchy" 2>&1)"
}

check "plan --catalog DIR, with no catalog beside the recipe, resolves greet and torchy"
expect_ok plan sb plan "$TMP/bare/r.yaml" --catalog "$cat_dir" --json

check "build --catalog DIR: the apt, wheel and kept-source layers take their records from DIR"
expect_ok build sb build "$TMP/bare/r.yaml" --catalog "$cat_dir" -o "$TMP/out-flag" --store "$STORE"
has_image flag "$TMP/out-flag"
want=$(manifest_digest "$TMP/out-flag" t)

check "STACKBUILD_CATALOG=DIR builds the same image"
expect_ok env env STACKBUILD_CATALOG="$cat_dir" "$SB" build "$TMP/bare/r.yaml" -o "$TMP/out-env" \
  --store "$TMP/store-env" --progress plain
[[ $(manifest_digest "$TMP/out-env" t) == "$want" ]] || fail "STACKBUILD_CATALOG built another image"

check "lock --catalog DIR, then build --locked --catalog DIR: the same image"
expect_ok lock sb lock "$TMP/bare/r.yaml" --catalog "$cat_dir" --store "$STORE"
grep -q 'torchy-2.0-' "$TMP/bare/r.yaml.lock" || fail "the lockfile pins no torchy 2.0 wheel: $(cat "$TMP/bare/r.yaml.lock")"
expect_ok locked sb build "$TMP/bare/r.yaml" --locked --catalog "$cat_dir" -o "$TMP/out-locked" \
  --store "$TMP/store-locked"
[[ $(manifest_digest "$TMP/out-locked" t) == "$want" ]] || fail "build --locked built another image"

check "beside a decoy layers/, build --catalog DIR still builds from DIR, not the decoy"
expect_ok decoy sb build "$TMP/decoy/r.yaml" --catalog "$cat_dir" -o "$TMP/out-decoy" --store "$TMP/store-decoy"
has_image decoy "$TMP/out-decoy"
[[ $(manifest_digest "$TMP/out-decoy" t) == "$want" ]] || fail "the build beside the decoy differs"

pass
