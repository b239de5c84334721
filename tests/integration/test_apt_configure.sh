#!/usr/bin/env bash
# `configure: true` on an apt layer: `dpkg --configure -a` runs in the build sandbox
# and its effects join the layer (runs as root; skipped otherwise, or without
# dpkg-deb or the host's dpkg to put in the image).
#
# The image: a static busybox plus the host's dpkg (and the shared libraries it
# loads) and ldconfig, as a copy layer; then an apt layer installing `greet` from a
# fixture repository (built here with dpkg-deb, file:// URL, trusted) whose postinst
# writes /var/lib/greet/state, deletes a file of its own package and one of the base
# layer. Checks:
#   - without `configure`, greet is "install ok unpacked" and the postinst did not run;
#   - with it, the postinst ran once ("configure" as its argument), greet is
#     "install ok installed", both deleted files are gone from the image (a whiteout
#     for the base layer's, nothing for the package's own), and the image still has
#     one layer per recipe layer;
#   - an apt layer above it starts from the configured state (greet stays installed);
#   - a failing postinst fails the build with dpkg's words and the log, and no image.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool dpkg dpkg-deb ldd gzip sha256sum
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
[[ -x $LDCONFIG ]] || skip "no ldconfig on this machine"
cd "$TMP"

# --- the base: busybox + dpkg -------------------------------------------------------
make_busybox_root base
put() {  # put HOSTFILE: copies it (and, for a symlink, what it points to) into base/
  local f=$1
  mkdir -p "base$(dirname "$f")"
  cp -aL "$f" "base$f"
}
for exe in "$(command -v dpkg)" "$LDCONFIG"; do
  mkdir -p base/usr/bin base/sbin
  cp -L "$exe" "base/usr/bin/$(basename "$exe")"
  ldd "$exe" 2>/dev/null | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do put "$lib"; done
done
mv base/usr/bin/ldconfig base/sbin/ldconfig
echo "from the base layer" >base/etc/base.conf
mkdir -p base/etc/dpkg

# --- the fixture repository -----------------------------------------------------------
mkdir -p repo/pool repo/dists/bookworm/main/binary-amd64
deb() {  # deb NAME VERSION POSTINST: builds repo/pool/NAME_VERSION_amd64.deb
  local d=src-$1
  mkdir -p "$d/DEBIAN" "$d/etc" "$d/usr/share/$1"
  printf 'Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: T <t@example.invalid>\nDescription: test\n' "$1" "$2" \
    >"$d/DEBIAN/control"
  echo "data of $1" >"$d/usr/share/$1/data"
  echo "remove me" >"$d/etc/$1.remove-me"
  if [[ -n $3 ]]; then printf '%s\n' "$3" >"$d/DEBIAN/postinst" && chmod 0755 "$d/DEBIAN/postinst"; fi
  dpkg-deb --root-owner-group -Zgzip --build "$d" "repo/pool/$1_$2_amd64.deb" >/dev/null
}
publish() {
  local p=repo/dists/bookworm/main/binary-amd64/Packages f
  : >"$p"
  for f in repo/pool/*.deb; do
    dpkg-deb -f "$f" Package Version Architecture Maintainer Description >>"$p"
    printf 'Filename: pool/%s\nSize: %s\nSHA256: %s\n\n' "$(basename "$f")" "$(stat -c %s "$f")" \
      "$(sha256sum "$f" | cut -d' ' -f1)" >>"$p"
  done
  gzip -kf "$p"
  {
    printf 'Origin: Test\nSuite: bookworm\nCodename: bookworm\nComponents: main\nArchitectures: amd64\nSHA256:\n'
    for f in main/binary-amd64/Packages main/binary-amd64/Packages.gz; do
      printf ' %s %s %s\n' "$(sha256sum "repo/dists/bookworm/$f" | cut -d' ' -f1)" \
        "$(stat -c %s "repo/dists/bookworm/$f")" "$f"
    done
  } >repo/dists/bookworm/InRelease
}
deb greet 1.0 '#!/bin/sh
set -e
mkdir -p /var/lib/greet
echo "$1" >>/var/lib/greet/state
rm /etc/greet.remove-me /etc/base.conf'
deb extra 1.0 ''
publish
echo "deb [trusted=yes] file://$TMP/repo bookworm main" >sources.list
export STACKBUILD_APT_SOURCES=$TMP/sources.list

recipe() {  # recipe FILE CONFIGURE [MORE-LAYERS]
  cat >"$1" <<EOF
stack: cfg
source_date_epoch: 1700000000
matrix: {os: [bookworm]}
layers:
  - {name: base, preserve_modes: true, copy: [{src: base/, dst: /}]}
  - {name: greet, apt: [greet], configure: $2}
${3:-}
tags: ["cfg:1"]
EOF
}
build() {  # build NAME RECIPE: builds and unpacks into r-NAME
  expect_ok "$1" sb build "$2" -o "out-$1" --store "$STORE" --catalog "$SB_SOURCE_DIR/layers"
  expect_ok "unpack-$1" sb unpack "out-$1:1" "r-$1" --store "$STORE"
}
status_of() { awk -v p="$2" '$1 == "Package:" {on = ($2 == p)} on && $1 == "Status:" {print; exit}' "$1/var/lib/dpkg/status"; }

check "without configure the postinst does not run"
recipe plain.yaml false
build plain plain.yaml
[[ $(status_of r-plain greet) == "Status: install ok unpacked" ]] || fail "greet: $(status_of r-plain greet)"
[[ ! -e r-plain/var/lib/greet/state && -e r-plain/etc/greet.remove-me && -e r-plain/etc/base.conf ]] ||
  fail "the postinst ran without configure"

check "configure: true runs dpkg --configure -a in the sandbox, into the same layer"
recipe cfg.yaml true
build cfg cfg.yaml
grep -q 'greet | Setting up greet (1.0)' cfg.err || { show_output cfg; fail "dpkg's output did not stream under the layer's name"; }
[[ $(cat r-cfg/var/lib/greet/state) == "configure" ]] || fail "the postinst's state file: '$(cat r-cfg/var/lib/greet/state)'"
[[ $(status_of r-cfg greet) == "Status: install ok installed" ]] || fail "greet: $(status_of r-cfg greet)"
[[ ! -e r-cfg/etc/greet.remove-me ]] || fail "the package's file the postinst deleted is in the image"
[[ ! -e r-cfg/etc/base.conf ]] || fail "the base layer's file the postinst deleted is in the image"
[[ -f r-cfg/usr/share/greet/data ]] || fail "the package's data is missing"
python3 - out-cfg <<'PY' || fail "the layers are not as expected"
import json, sys, tarfile
d = sys.argv[1]; b = lambda dg: f"{d}/blobs/{dg.replace(':', '/')}"
m = json.load(open(b(json.load(open(f"{d}/index.json"))["manifests"][0]["digest"])))
assert len(m["layers"]) == 2, f"{len(m['layers'])} layers"
names = tarfile.open(b(m["layers"][1]["digest"])).getnames()
assert "etc/.wh.base.conf" in names, "no whiteout for the base layer's etc/base.conf"
assert not any(n.endswith("greet.remove-me") for n in names), "the package's deleted file is in the layer"
assert "var/lib/greet/state" in names
PY

check "an apt layer above starts from the configured state"
recipe more.yaml true "  - {name: more, apt: [extra]}"
build more more.yaml
[[ $(status_of r-more greet) == "Status: install ok installed" ]] || fail "greet after another apt layer: $(status_of r-more greet)"
[[ $(status_of r-more extra) == "Status: install ok installed" ]] || fail "extra: $(status_of r-more extra)"

check "lock names the machine's repository by suite, not URL; --locked fetches from where this machine's sources say now"
expect_ok lock sb lock plain.yaml --store "$STORE" --catalog "$SB_SOURCE_DIR/layers"
if grep -q "file://\|\"url\"\|\"uri\"" plain.yaml.lock; then fail "the lock holds the repository's URL: $(grep -m2 "file://" plain.yaml.lock)"; fi
grep -q '"from": "machine"' plain.yaml.lock && grep -q '"path": "pool/greet_1.0_amd64.deb"' plain.yaml.lock ||
  fail "the lock does not name the machine's repository and the package's path: $(head -c 600 plain.yaml.lock)"
mv repo repo-moved  # the mirror moved; the machine's sources follow it
echo "deb [trusted=yes] file://$TMP/repo-moved bookworm main" >sources.list
expect_ok locked sb build plain.yaml --locked -o out-locked --store "$TMP/store-locked" --catalog "$SB_SOURCE_DIR/layers"
expect_ok unpack-locked sb unpack "out-locked:1" r-locked --store "$TMP/store-locked"
[[ -f r-locked/usr/share/greet/data ]] || fail "the locked build from the moved repository lacks greet"
echo "deb [trusted=yes] file://$TMP/elsewhere other main" >sources.list  # a machine without that repository
expect_rc 3 nomirror sb build plain.yaml --locked -o out-nomirror --store "$TMP/store-nomirror" --catalog "$SB_SOURCE_DIR/layers"
grep -q "this machine's apt configuration has no such repository" nomirror.err || { show_output nomirror; fail "not the missing-repository error"; }
mv repo-moved repo
echo "deb [trusted=yes] file://$TMP/repo bookworm main" >sources.list

check "a failing postinst fails the build with dpkg's words, and leaves no image"
rm repo/pool/greet_*.deb
deb greet 1.1 '#!/bin/sh
echo "greet cannot be configured here" >&2
exit 3'
publish
expect_rc 1 failing sb build cfg.yaml -o out-failing --store "$STORE" --catalog "$SB_SOURCE_DIR/layers"
grep -q 'greet cannot be configured here' failing.err || { show_output failing; fail "the postinst's output is not in the error"; }
grep -q 'exited with status' failing.err && grep -q 'log: ' failing.err || { show_output failing; fail "no exit status or log in the error"; }
[[ ! -e out-failing ]] || fail "a failed build left out-failing"
pass
