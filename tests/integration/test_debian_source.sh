#!/usr/bin/env bash
# Debian source packages as a layer's source (`source: {debian: NAME}`), from
# a fixture of the machine's Debian repositories (suite "fixture", signed by
# key D, read under STACKBUILD_APT_ROOT; served on 127.0.0.1). The package,
# demo 1.0-2, is made with dpkg-source -b: format 3.0 (quilt), an orig
# tarball (with an executable and a symlink), an orig-extra component
# tarball, and a debian/ directory whose series (a comment, a blank line,
# one patch with an explicit -p1) patches the upstream tree and the
# component. Its Sources paragraph, written here, sits after an older
# version's. Runs as root on a busybox base (keep_source: /opt/demo):
#   - the tree in the image equals `dpkg-source -x`'s (contents, modes,
#     symlinks; but for quilt's .pc/ bookkeeping), the suite's newest version;
#   - the image label (and so the SBOM and release notes) names the package,
#     version, .dsc and files by sha256;
#   - `lock` pins the version, the .dsc and every file by sha256 and the tree;
#     `build --locked` from an empty store gives the same image, and an
#     offline rebuild from that store too; a lockfile whose hash differs from
#     the archive's is refused;
#   - refused, each with a clear error and no image: a tampered orig tarball,
#     a tampered .dsc, a tampered Sources (against the signed Release), an
#     InRelease signed by another key, an InRelease altered after signing, a
#     patch naming a path outside the tree, a patch that does not apply;
#   - with Debian's uploader keyring under the machine's root (or
#     STACKBUILD_DEBIAN_KEYRINGS): an unsigned .dsc and one whose signature
#     is BAD are refused (Sources lists each honestly); one signed by an
#     uploader's key is taken and the build names the key; one signed by a key
#     the keyring lacks is taken on the hash chain, saying so; without a
#     keyring the build says the signature was not checked;
#   - format 1.0 (an orig tarball and a .diff.gz): the tree equals
#     `dpkg-source -x`'s, debian/rules executable; a .diff.gz naming a path
#     outside the tree is refused.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool gpg gpgv dpkg-source patch tar xz sha256sum md5sum
unset APT_CONFIG http_proxy https_proxy all_proxy HTTP_PROXY ALL_PROXY no_proxy NO_PROXY
unset STACKBUILD_APT_SOURCES STACKBUILD_OFFLINE
cd "$TMP"

export GNUPGHOME="$TMP/gnupg"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
for who in debian other uploader; do
  gpg --batch --passphrase '' --quick-gen-key "Fixture $who <$who@example.invalid>" ed25519 sign never 2>/dev/null ||
    fail "gpg could not make key $who"
  gpg --batch --export "$who@example.invalid" >"$TMP/$who.gpg"
done

# The source package, as a maintainer makes it.
make_package() {
  rm -rf pkg && mkdir -p pkg/up/demo-1.0/src pkg/up/demo-1.0/bin pkg/extra/extra-0.1
  printf 'int main(void) { return 0; }\n' >pkg/up/demo-1.0/src/main.c
  printf '#!/bin/sh\necho hi\n' >pkg/up/demo-1.0/bin/run && chmod 755 pkg/up/demo-1.0/bin/run
  printf 'upstream readme\n' >pkg/up/demo-1.0/README && ln -s README pkg/up/demo-1.0/README.link
  printf 'private\n' >pkg/up/demo-1.0/src/private.h && chmod 600 pkg/up/demo-1.0/src/private.h
  printf 'data\n' >pkg/extra/extra-0.1/data.txt
  tar -C pkg/up -czf pkg/demo_1.0.orig.tar.gz demo-1.0
  tar -C pkg/extra -cJf pkg/demo_1.0.orig-extra.tar.xz extra-0.1
  (
    cd pkg && tar xzf demo_1.0.orig.tar.gz && mkdir demo-1.0/extra &&
      tar -C demo-1.0/extra --strip-components=1 -xJf demo_1.0.orig-extra.tar.xz
    cd demo-1.0 && mkdir -p debian/patches debian/source
    echo "3.0 (quilt)" >debian/source/format
    printf 'Source: demo\nSection: misc\nPriority: optional\nMaintainer: T <t@example.invalid>\n\nPackage: demo\nArchitecture: all\nDescription: fixture\n fixture\n' >debian/control
    printf 'demo (1.0-2) unstable; urgency=medium\n\n  * Fixture.\n\n -- T <t@example.invalid>  Mon, 01 Jan 2024 00:00:00 +0000\n' >debian/changelog
    printf '#!/usr/bin/make -f\n%%:\n\tdh $@\n' >debian/rules && chmod +x debian/rules
    printf 'Description: the readme\n--- a/README\n+++ b/README\n@@ -1 +1,2 @@\n upstream readme\n+patched by Debian\n' \
      >debian/patches/01-readme.patch
    printf 'Description: the component, and a new file\n--- a/extra/data.txt\n+++ b/extra/data.txt\n@@ -1 +1 @@\n-data\n+data, patched\n--- /dev/null\n+++ b/src/new.c\n@@ -0,0 +1 @@\n+/* new */\n' \
      >debian/patches/02-extra.patch
    printf '# applied in order\n01-readme.patch -p1\n\n02-extra.patch\n' >debian/patches/series
    cd .. && dpkg-source -b demo-1.0 >/dev/null 2>&1
  ) || fail "dpkg-source -b failed"
  [[ -f pkg/demo_1.0-2.dsc ]] || fail "dpkg-source made no .dsc"
}
make_package

www="$TMP/www"
pool="$www/debian/pool/main/d/demo"
mkdir -p "$pool"
cp pkg/demo_1.0-2.dsc pkg/demo_1.0.orig.tar.gz pkg/demo_1.0.orig-extra.tar.xz pkg/demo_1.0-2.debian.tar.xz "$pool/"

# paragraph PACKAGE VERSION FILE...: a Sources paragraph for files in $pool.
paragraph() {
  local name=$1 ver=$2 f
  shift 2
  printf 'Package: %s\nBinary: %s\nVersion: %s\nMaintainer: T <t@example.invalid>\nFormat: 3.0 (quilt)\nDirectory: pool/main/d/demo\nFiles:\n' \
    "$name" "$name" "$ver"
  for f in "$@"; do printf ' %s %s %s\n' "$(md5sum "$pool/$f" | cut -d' ' -f1)" "$(stat -c %s "$pool/$f")" "$f"; done
  printf 'Checksums-Sha256:\n'
  for f in "$@"; do printf ' %s %s %s\n' "$(sha256sum "$pool/$f" | cut -d' ' -f1)" "$(stat -c %s "$pool/$f")" "$f"; done
  printf '\n'
}
# publish [SIGNER]: dists/fixture: main/source/Sources(.xz) (an older version
# first, whose files are not there), the Release, InRelease signed by SIGNER.
files=(demo_1.0-2.dsc demo_1.0.orig.tar.gz demo_1.0.orig-extra.tar.xz demo_1.0-2.debian.tar.xz)
publish() {
  local d="$www/debian/dists/fixture" f
  mkdir -p "$d/main/source"
  {
    printf 'Package: demo\nVersion: 0.9-1\nFormat: 3.0 (native)\nDirectory: pool/main/d/demo\nChecksums-Sha256:\n %s 1 demo_0.9-1.dsc\n %s 1 demo_0.9-1.tar.xz\n\n' \
      "$(printf a | sha256sum | cut -d' ' -f1)" "$(printf b | sha256sum | cut -d' ' -f1)"
    paragraph demo 1.0-2 "${files[@]}"
  } >"$d/main/source/Sources"
  release_suite "${1:-debian}"
}
# release_suite [SIGNER]: dists/fixture's Sources.xz from its Sources, the Release
# over both, and InRelease signed by SIGNER (default debian).
release_suite() {
  local d="$www/debian/dists/fixture" f
  xz -kf "$d/main/source/Sources"
  {
    printf 'Origin: Debian\nLabel: Debian\nSuite: fixture\nCodename: fixture\nComponents: main\nArchitectures: amd64 source\nSHA256:\n'
    for f in main/source/Sources main/source/Sources.xz; do
      printf ' %s %s %s\n' "$(sha256sum "$d/$f" | cut -d' ' -f1)" "$(stat -c %s "$d/$f")" "$f"
    done
  } >"$d/Release"
  rm -f "$d/InRelease"
  gpg --batch -u "${1:-debian}@example.invalid" --clearsign -o "$d/InRelease" "$d/Release"
}
publish

serve_dir "$www"
url=$SERVED_URL
root="$TMP/root"
export STACKBUILD_APT_ROOT=$root
mkdir -p "$root/etc/apt/sources.list.d"
printf 'ID=debian\nVERSION_CODENAME=fixture\n' >"$root/etc/os-release"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $url/debian
Suites: fixture
Components: main
Signed-By: $TMP/debian.gpg
EOF

make_busybox_root base
cat >demo.yaml <<'YAML'
stack: dsrc
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: demo
    source: {debian: demo}
    keep_source: /opt/demo
    build:
      run: ["true"]
tags: ["dsrc:1"]
YAML

# listing DIR: each path (but quilt's .pc/) with its type, mode and link target.
listing() { (cd "$1" && find . -path ./.pc -prune -o -printf '%y %m %p %l\n' | sort -k3); }

check "the tree in the image is dpkg-source -x's, patched, of the suite's newest version"
expect_ok build sb build demo.yaml -o out --store "$STORE"
expect_ok unpack sb unpack out:1 rootfs --store "$STORE"
(mkdir ref && cd ref && dpkg-source --no-check -x "$pool/demo_1.0-2.dsc" demo >/dev/null 2>&1) || fail "dpkg-source -x failed"
[[ -d ref/demo/.pc ]] || fail "dpkg-source -x left no .pc (the fixture's patches were not applied?)"
diff -r --no-dereference --exclude=.pc ref/demo rootfs/opt/demo || fail "the trees differ (< dpkg-source -x, > stackbuild)"
diff <(listing ref/demo) <(listing rootfs/opt/demo) || fail "modes or links differ (< dpkg-source -x, > stackbuild)"
grep -q 'patched by Debian' rootfs/opt/demo/README || fail "01-readme.patch is not applied"
[[ $(cat rootfs/opt/demo/extra/data.txt) == "data, patched" ]] || fail "the orig-extra component is not at extra/, patched"
say "$(listing rootfs/opt/demo | wc -l) paths, as dpkg-source -x unpacks them"

check "the image names the source package, version, .dsc and files by sha256"
python3 - out "$(sha256sum "$pool/demo_1.0-2.dsc" | cut -d' ' -f1)" \
  "$(sha256sum "$pool/demo_1.0.orig.tar.gz" | cut -d' ' -f1)" <<'PY' || fail "the source label is not right"
import json, sys
d, dsc, orig = sys.argv[1:]
b = lambda dg: f"{d}/blobs/{dg.replace(':', '/')}"
m = json.load(open(b(json.load(open(f"{d}/index.json"))["manifests"][0]["digest"])))
labels = json.load(open(b(m["config"]["digest"])))["config"]["Labels"]
src = json.loads(labels["dev.stackbuild.source.demo"])["debian"]
assert src["package"] == "demo" and src["version"] == "1.0-2" and src["suite"] == "fixture", src
assert src["dsc"] == {"name": "demo_1.0-2.dsc", "sha256": dsc}, src
assert {"name": "demo_1.0.orig.tar.gz", "sha256": orig} in src["files"] and len(src["files"]) == 3, src
PY
expect_ok sbom sb sbom out:1 --store "$STORE" -o sbom.json
grep -q 'pkg:deb/debian/demo@1.0-2?arch=source' sbom.json || fail "the SBOM has no purl of the source package"
grep -q "demo_1.0.orig-extra.tar.xz (sha256:$(sha256sum "$pool/demo_1.0.orig-extra.tar.xz" | cut -d' ' -f1))" sbom.json ||
  fail "the SBOM does not name the files by sha256"

check "lock pins the version, the .dsc, every file and the tree; --locked rebuilds it from an empty store, offline after"
expect_ok lock sb lock demo.yaml --store "$STORE"
python3 - demo.yaml.lock "$(sha256sum "$pool/demo_1.0-2.dsc" | cut -d' ' -f1)" <<'PY' || fail "the lockfile does not pin the source"
import json, sys
lock = json.load(open(sys.argv[1]))
text = json.dumps(lock)
src = lock["points"][0]["source"]["demo"]
assert src["debian"] == "demo" and src["version"] == "1.0-2" and src["suite"] == "fixture", src
assert src["dsc"]["sha256"] == sys.argv[2] and len(src["files"]) == 3 and src["tree"].startswith("sha256:"), src
assert "127.0.0.1" not in text, "the lockfile names a host"
PY
expect_ok locked sb build demo.yaml --locked -o out-locked --store "$TMP/store2"
[[ $(manifest_digest out 1) == $(manifest_digest out-locked 1) ]] ||
  fail "--locked from an empty store gave another image"
# Offline, with another step (so the layer is built again, its source taken
# from the store: the InRelease checked again, the index and files by sha256).
sed 's/run: \["true"\]/run: ["true \&\& true"]/' demo.yaml >demo-offline.yaml
grep -q 'true && true' demo-offline.yaml || fail "sed did not change the step"
expect_ok offline env STACKBUILD_OFFLINE=1 "$SB" build demo-offline.yaml -o out-offline --store "$STORE" --progress plain
grep -q 'source Debian source demo' "$TMP/offline.err" "$TMP/offline.out" || fail "the source was not prepared again offline"
expect_ok unpack-offline sb unpack out-offline:1 rootfs-offline --store "$STORE"
diff -r --no-dereference rootfs/opt/demo rootfs-offline/opt/demo || fail "the offline tree differs"

check "--locked refuses a pinned hash the archive does not have"
sed "s/$(sha256sum "$pool/demo_1.0.orig.tar.gz" | cut -d' ' -f1)/$(printf x | sha256sum | cut -d' ' -f1)/" demo.yaml.lock >lock.tmp &&
  cp demo.yaml.lock lock.good && mv lock.tmp demo.yaml.lock
expect_rc 1 locked-bad sb build demo.yaml --locked -o out-locked-bad --store "$TMP/store3"
grep -q 'demo_1.0.orig.tar.gz' "$TMP/locked-bad.err" || fail "the error does not name the file: $(cat "$TMP/locked-bad.err")"
grep -qi 'files are not those\|sha256' "$TMP/locked-bad.err" || fail "the error does not say what is wrong: $(cat "$TMP/locked-bad.err")"
[[ ! -e out-locked-bad/index.json ]] || fail "an image was written"
mv lock.good demo.yaml.lock

# flip FILE: one byte of FILE changed, its size kept.
flip() { python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 1; open(sys.argv[1], "wb").write(b)' "$1"; }

# refused NAME PATTERN: a build from an empty store fails, its error matching
# PATTERN (grep -E), and writes no image.
refused() {
  expect_rc 1 "$1" sb build demo.yaml -o "out-$1" --store "$TMP/store-$1"
  grep -Eq "$2" "$TMP/$1.err" || { show_output "$1"; fail "the error does not say '$2'"; }
  [[ ! -e out-$1/index.json ]] || fail "an image was written"
}

check "a tampered orig tarball is refused, and never enters the store"
cp "$pool/demo_1.0.orig.tar.gz" good.orig
flip "$pool/demo_1.0.orig.tar.gz"
refused orig 'sha256 mismatch.*demo_1.0.orig.tar.gz'
[[ ! -e $TMP/store-orig/blobs/sha256/$(sha256sum "$pool/demo_1.0.orig.tar.gz" | cut -d' ' -f1) ]] ||
  fail "the tampered tarball entered the store"
cp good.orig "$pool/demo_1.0.orig.tar.gz"

check "a tampered .dsc is refused"
cp "$pool/demo_1.0-2.dsc" good.dsc
sed -i 's/^Maintainer: T </Maintainer: M </' "$pool/demo_1.0-2.dsc"
cmp -s good.dsc "$pool/demo_1.0-2.dsc" && fail "sed did not change the .dsc"
refused dsc 'sha256 mismatch.*demo_1.0-2.dsc'
cp good.dsc "$pool/demo_1.0-2.dsc"

check "a tampered Sources index (not the one the signed Release pins) is refused"
d="$www/debian/dists/fixture/main/source"
cp "$d/Sources.xz" good.xz
sed 's/^Version: 1.0-2/Version: 1.0-9/' "$d/Sources" | xz >"$d/Sources.xz"
truncate -s "$(stat -c %s good.xz)" "$d/Sources.xz"  # the size the Release says: only the hash tells
refused sources 'sha256 mismatch.*Sources.xz'
cp good.xz "$d/Sources.xz"

check "an InRelease signed by a key not in the keyring is refused"
publish other
refused key 'refusing the repository: it is signed by a key that is not in'
publish

check "an InRelease altered after it was signed is refused"
sed -i 's/^Origin: Debian$/Origin: Debiam/' "$www/debian/dists/fixture/InRelease"
refused badsig 'refusing the repository: the signature is BAD'
publish

# The .dsc's own signature, its uploader's, against Debian's uploader keyrings
# (debian-keyring's, under the machine's root here): each variant of the .dsc
# is listed honestly in Sources, so only the uploader check can refuse it.
# sign_dsc [WHO]: the .dsc dpkg-source made, clearsigned by WHO (none: as made).
sign_dsc() {
  if [[ -n ${1:-} ]]; then
    gpg --batch --yes -u "$1@example.invalid" --clearsign -o "$pool/demo_1.0-2.dsc" pkg/demo_1.0-2.dsc
  else
    cp pkg/demo_1.0-2.dsc "$pool/demo_1.0-2.dsc"
  fi
  publish
}
mkdir -p "$root/usr/share/keyrings"
cp "$TMP/uploader.gpg" "$root/usr/share/keyrings/debian-keyring.gpg"
check "with Debian's uploader keyring: an unsigned .dsc is refused"
refused unsigned "demo_1.0-2.dsc \\(the uploader's signature\\): refusing it: it is not signed"
check "with Debian's uploader keyring: a .dsc whose signature is BAD (altered after signing) is refused"
sign_dsc uploader
sed -i 's/^Maintainer: T </Maintainer: M </' "$pool/demo_1.0-2.dsc"
publish  # Sources lists the altered .dsc honestly: only its signature tells
refused badupload "demo_1.0-2.dsc \\(the uploader's signature\\): refusing it: the signature is BAD"
check "a .dsc signed by a key the keyring lacks is taken on the hash chain, and the build says so"
sign_dsc other
other_id=$(gpg --batch --with-colons --list-keys other@example.invalid | awk -F: '/^pub/ {print $5; exit}')
expect_ok otherkey sb build demo.yaml -o out-otherkey --store "$TMP/store-otherkey"
grep -q "signed by key $other_id, which is in none of debian-keyring.gpg: the uploader is not checked" "$TMP/otherkey.err" ||
  { show_output otherkey; fail "the build does not say the signer is unknown"; }
check "a .dsc signed by an uploader's key is taken, and the build says by which key"
sign_dsc uploader
fpr=$(gpg --batch --with-colons --fingerprint uploader@example.invalid | awk -F: '/^fpr/ {print $10; exit}')
expect_ok signed sb build demo.yaml -o out-signed --store "$TMP/store-signed"
grep -q "Debian demo 1.0-2 (.dsc signed by $fpr, a key of debian-keyring.gpg)" "$TMP/signed.err" ||
  { show_output signed; fail "the build does not say who signed the .dsc"; }
check "STACKBUILD_DEBIAN_KEYRINGS names the keyrings instead (one that does not exist is an error)"
STACKBUILD_DEBIAN_KEYRINGS="$TMP/other.gpg:$TMP/uploader.gpg" expect_ok envkeys sb build demo.yaml -o out-envkeys --store "$TMP/store-envkeys"
grep -q "Debian demo 1.0-2 (.dsc signed by $fpr, a key of other.gpg, uploader.gpg)" "$TMP/envkeys.err" ||
  { show_output envkeys; fail "the variable's keyrings were not used"; }
STACKBUILD_DEBIAN_KEYRINGS="$TMP/none.gpg" expect_rc 1 nokeys sb build demo.yaml -o out-nokeys --store "$TMP/store-nokeys"
grep -q "STACKBUILD_DEBIAN_KEYRINGS names $TMP/none.gpg, which is not a file" "$TMP/nokeys.err" || { show_output nokeys; fail "no clear error"; }
rm "$root/usr/share/keyrings/debian-keyring.gpg"
check "without an uploader keyring the signed .dsc is taken on its hash chain, and the build says its signature was not checked"
expect_ok unchecked sb build demo.yaml -o out-unchecked --store "$TMP/store-unchecked"
grep -q "the .dsc's uploader signature not checked: no Debian keyring here" "$TMP/unchecked.err" || { show_output unchecked; fail "not said"; }
sign_dsc

# A second version whose debian tarball is made by hand (dpkg-source -b would
# refuse it): its .dsc and Sources are honest, its patch is not.
# hostile_version VERSION PATCH-TEXT: demo VERSION with that one patch.
hostile_version() {
  local ver=$1 text=$2 dsc="demo_$1.dsc" deb="demo_$1.debian.tar.xz"
  rm -rf h && mkdir -p h/debian/patches h/debian/source && echo "3.0 (quilt)" >h/debian/source/format
  printf '%s' "$text" >h/debian/patches/evil.patch && printf 'evil.patch\n' >h/debian/patches/series
  mkdir -p "$TMP/outside" && ln -s "$TMP/outside" h/debian/out  # a link out of the tree, as a tarball may hold
  tar -C h -cJf "$pool/$deb" debian
  {
    printf 'Format: 3.0 (quilt)\nSource: demo\nVersion: %s\nChecksums-Sha256:\n' "$ver"
    for f in demo_1.0.orig.tar.gz demo_1.0.orig-extra.tar.xz "$deb"; do
      printf ' %s %s %s\n' "$(sha256sum "$pool/$f" | cut -d' ' -f1)" "$(stat -c %s "$pool/$f")" "$f"
    done
  } >"$pool/$dsc"
  files=("$dsc" demo_1.0.orig.tar.gz demo_1.0.orig-extra.tar.xz "$deb")
  publish_version "$ver"
}
publish_version() {  # Sources with only VERSION of demo
  paragraph demo "$1" "${files[@]}" >"$www/debian/dists/fixture/main/source/Sources"
  release_suite
}

check "a Debian patch that names a path outside the tree is refused before patch runs"
hostile_version 1.0-3 $'--- a/../../escaped\n+++ b/../../escaped\n@@ -0,0 +1 @@\n+owned\n'
refused escape "debian/patches/evil.patch: refusing the patch: it names 'a/../../escaped', which is outside the tree"
[[ ! -e $TMP/escaped && ! -e $TMP/store-escape/escaped ]] || fail "the patch wrote outside the tree"

check "a Debian patch that writes through a symbolic link in the tree is refused before patch runs"
hostile_version 1.0-5 $'--- /dev/null\n+++ b/debian/out/pwned\n@@ -0,0 +1 @@\n+owned\n'
refused link "debian/patches/evil.patch: refusing the patch: it names 'b/debian/out/pwned', which is through a symbolic link"
[[ ! -e $TMP/outside/pwned ]] || fail "the patch wrote through the link"

check "a git-style rename out of the tree is refused before patch runs"
hostile_version 1.0-6 $'diff --git a/README b/README\nsimilarity index 100%\nrename from README\nrename to ../../renamed\n'
refused rename "refusing the patch: it names '../../renamed', which is outside the tree"

check "a Debian patch that does not apply fails the build, naming it"
hostile_version 1.0-4 $'--- a/README\n+++ b/README\n@@ -1 +1 @@\n-not what the file says\n+x\n'
refused noapply "the Debian patch debian/patches/evil.patch does not apply"

# Format 1.0, as older packages are: an orig tarball and a .diff.gz that dpkg-source
# -x applies with -p1, then makes debian/rules executable.
# publish_legacy FILE...: Sources with legacy VERSION (from the .dsc) made of FILEs.
publish_legacy() {
  local f ver
  ver=$(awk '/^Version:/ {print $2}' "$pool/$1")
  {
    printf 'Package: legacy\nVersion: %s\nFormat: 1.0\nDirectory: pool/main/d/demo\nChecksums-Sha256:\n' "$ver"
    for f in "$@"; do printf ' %s %s %s\n' "$(sha256sum "$pool/$f" | cut -d' ' -f1)" "$(stat -c %s "$pool/$f")" "$f"; done
  } >"$www/debian/dists/fixture/main/source/Sources"
  release_suite
}
(
  mkdir -p legacy/legacy-2.0/src && cd legacy
  printf 'int x;\n' >legacy-2.0/src/a.c && printf 'readme\n' >legacy-2.0/README
  tar czf legacy_2.0.orig.tar.gz legacy-2.0
  mkdir legacy-2.0/debian && printf 'readme\npatched in the diff\n' >legacy-2.0/README
  printf 'Source: legacy\nSection: misc\nPriority: optional\nMaintainer: T <t@example.invalid>\n\nPackage: legacy\nArchitecture: all\nDescription: fixture\n fixture\n' >legacy-2.0/debian/control
  printf 'legacy (2.0-1) unstable; urgency=medium\n\n  * Fixture.\n\n -- T <t@example.invalid>  Mon, 01 Jan 2024 00:00:00 +0000\n' >legacy-2.0/debian/changelog
  printf '#!/usr/bin/make -f\n%%:\n\tdh $@\n' >legacy-2.0/debian/rules
  dpkg-source --format=1.0 -b legacy-2.0 >/dev/null 2>&1
) || fail "dpkg-source --format=1.0 -b failed"
[[ -f legacy/legacy_2.0-1.diff.gz ]] || fail "dpkg-source made no .diff.gz"
cp legacy/legacy_2.0-1.dsc legacy/legacy_2.0.orig.tar.gz legacy/legacy_2.0-1.diff.gz "$pool/"
publish_legacy legacy_2.0-1.dsc legacy_2.0.orig.tar.gz legacy_2.0-1.diff.gz
sed -e 's/name: demo/name: legacy/' -e 's/{debian: demo}/{debian: legacy}/' -e 's|/opt/demo|/opt/legacy|' demo.yaml >legacy.yaml

check "a format 1.0 package (orig tarball and .diff.gz) is unpacked as dpkg-source -x unpacks it"
expect_ok legacy sb build legacy.yaml -o out-legacy --store "$TMP/store-legacy"
expect_ok legacyunpack sb unpack out-legacy:1 rootfs-legacy --store "$TMP/store-legacy"
(mkdir ref-legacy && cd ref-legacy && dpkg-source --no-check -x "$pool/legacy_2.0-1.dsc" legacy >/dev/null 2>&1) ||
  fail "dpkg-source -x of the 1.0 package failed"
diff -r --no-dereference ref-legacy/legacy rootfs-legacy/opt/legacy || fail "the 1.0 trees differ (< dpkg-source -x, > stackbuild)"
diff <(listing ref-legacy/legacy) <(listing rootfs-legacy/opt/legacy) || fail "1.0: modes or links differ (< dpkg-source -x, > stackbuild)"
grep -q "patched in the diff" rootfs-legacy/opt/legacy/README || fail "the .diff.gz is not applied"
[[ -x rootfs-legacy/opt/legacy/debian/rules ]] || fail "debian/rules is not executable"

check "a 1.0 .diff.gz that names a path outside the tree is refused before patch runs"
printf -- '--- legacy-2.0.orig/../../escaped\n+++ legacy-2.0/../../escaped\n@@ -0,0 +1 @@\n+owned\n' | gzip -n >"$pool/legacy_2.0-2.diff.gz"
printf 'Format: 1.0\nSource: legacy\nVersion: 2.0-2\nChecksums-Sha256:\n %s %s legacy_2.0.orig.tar.gz\n %s %s legacy_2.0-2.diff.gz\n' \
  "$(sha256sum "$pool/legacy_2.0.orig.tar.gz" | cut -d' ' -f1)" "$(stat -c %s "$pool/legacy_2.0.orig.tar.gz")" \
  "$(sha256sum "$pool/legacy_2.0-2.diff.gz" | cut -d' ' -f1)" "$(stat -c %s "$pool/legacy_2.0-2.diff.gz")" >"$pool/legacy_2.0-2.dsc"
publish_legacy legacy_2.0-2.dsc legacy_2.0.orig.tar.gz legacy_2.0-2.diff.gz
expect_rc 1 legacyesc sb build legacy.yaml -o out-legacyesc --store "$TMP/store-legacyesc"
grep -q "refusing the patch: it names 'legacy-2.0.orig/../../escaped', which is outside the tree" "$TMP/legacyesc.err" ||
  { show_output legacyesc; fail "the escaping .diff.gz is not refused"; }
[[ ! -e $TMP/escaped && ! -e out-legacyesc/index.json ]] || fail "the diff wrote outside the tree, or an image was written"

pass
