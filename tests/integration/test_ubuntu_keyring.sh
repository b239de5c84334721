#!/usr/bin/env bash
# Ubuntu bases verify out of the box: a repository without a keyring of its
# own (the public Ubuntu archive, here a fixture of its layout: noble,
# noble-updates, noble-security with main and universe, signed by key U) is
# checked against Ubuntu's archive keyring, taken from the host
# (<root>/usr/share/keyrings/ubuntu-archive-keyring.gpg) or else from Debian's
# `ubuntu-keyring` package, fetched through the machine's Debian repositories
# (a fixture signed by key D, read under STACKBUILD_APT_ROOT; every request
# goes through a logging proxy, so the test sees what was fetched):
# - no host keyring: the package's keyring is used (looked for in the
#   machine's release first, found in its -backports as for bookworm), the
#   build verifies, and a second run takes it from the store, asking Debian
#   nothing;
# - a host keyring: it is used, nothing of Debian's is fetched, and the image
#   is the same;
# - neither: exit 3, naming the repository, the file looked for and the
#   package to install; a trusted (unchecked) repository of the machine that
#   offers the package is not used;
# - the package's .deb altered after its index was signed: refused;
# - an Ubuntu repository signed by a key not in the package's keyring: refused.
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=apt_lib.sh
source "$HERE/apt_lib.sh"
require_tool gpg gpgv dpkg-deb gzip sha256sum
unset APT_CONFIG http_proxy https_proxy all_proxy HTTP_PROXY ALL_PROXY no_proxy NO_PROXY
unset STACKBUILD_APT_SOURCES STACKBUILD_OFFLINE

www="$TMP/www"
export GNUPGHOME="$TMP/gnupg"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
for who in debian ubuntu other; do
  gpg --batch --passphrase '' --quick-gen-key "Fixture $who <$who@example.invalid>" ed25519 sign never 2>/dev/null ||
    fail "gpg could not make key $who"
  gpg --batch --export "$who@example.invalid" >"$TMP/$who.gpg"
done

# pkg REPO NAME VERSION [FILE=CONTENT_FILE]...: a package in REPO's pool.
pkg() {
  local repo=$1 name=$2 ver=$3 spec d
  shift 3
  d="$TMP/src/$repo-$name-$ver"
  mkdir -p "$d/DEBIAN" "$www/$repo/pool/main"
  printf 'Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: T <t@example.invalid>\nDescription: fixture\n' \
    "$name" "$ver" >"$d/DEBIAN/control"
  for spec in "$@"; do
    mkdir -p "$d/$(dirname "${spec%%=*}")"
    cp "${spec#*=}" "$d/${spec%%=*}"
  done
  dpkg-deb --root-owner-group -Zgzip --build "$d" "$www/$repo/pool/main/${name}_${ver}_all.deb" >/dev/null ||
    fail "dpkg-deb failed for $name $ver"
}

# dist REPO SUITE ORIGIN SIGNER [COMPONENT=DEB,DEB...]...: dists/SUITE of REPO,
# Ubuntu- or Debian-style: each component's Packages(.gz) listing its .debs
# (paths in REPO), a Release naming them, the InRelease clearsigned by SIGNER
# ("" for none: an unsigned repository).
dist() {
  local repo=$1 suite=$2 origin=$3 signer=$4 spec comp debs deb f comps=""
  shift 4
  local d="$www/$repo/dists/$suite"
  rm -rf "$d"
  for spec in "$@"; do
    comp=${spec%%=*} debs=${spec#*=}
    comps+=" $comp"
    mkdir -p "$d/$comp/binary-amd64"
    (
      cd "$www/$repo" || exit 1
      for deb in ${debs//,/ }; do
        dpkg-deb -f "$deb"
        printf 'Filename: %s\nSize: %s\nSHA256: %s\n\n' "$deb" "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)"
      done
    ) >"$d/$comp/binary-amd64/Packages"
    gzip -kf "$d/$comp/binary-amd64/Packages"
  done
  {
    printf 'Origin: %s\nLabel: %s\nSuite: %s\nCodename: %s\nComponents:%s\nArchitectures: amd64\nSHA256:\n' \
      "$origin" "$origin" "$suite" "${suite%%-*}" "$comps"
    for f in "$d"/*/binary-amd64/Packages*; do
      printf ' %s %s %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "${f#"$d"/}"
    done
  } >"$d/Release"
  [[ -z $signer ]] || gpg --batch -u "$signer@example.invalid" --clearsign -o "$d/InRelease" "$d/Release"
}

# Debian: the machine's release "fixture" (and -updates) without ubuntu-keyring;
# its -backports with it, its keyring holding key U (and another file).
keyring_deb=pool/main/ubuntu-keyring_2099.1~bpo1_all.deb
pkg debian base-files 1 usr/share/doc/base-files/x="$TMP/debian.gpg"
pkg debian ubuntu-keyring 2099.1~bpo1 usr/share/keyrings/ubuntu-archive-keyring.gpg="$TMP/ubuntu.gpg" \
  usr/share/keyrings/ubuntu-master-keyring.gpg="$TMP/other.gpg"
dist debian fixture Debian debian main=pool/main/base-files_1_all.deb
dist debian fixture-updates Debian debian main=
dist debian fixture-backports "Debian Backports" debian main=$keyring_deb
# A repository the machine takes on trust (trusted=yes, unsigned), offering an
# ubuntu-keyring that holds key "other": never to be used.
pkg evil ubuntu-keyring 9999 usr/share/keyrings/ubuntu-archive-keyring.gpg="$TMP/other.gpg"
dist evil fixture Debian "" main=pool/main/ubuntu-keyring_9999_all.deb

# Ubuntu's layout: noble, noble-updates (archive), noble-security (security),
# main and universe, signed by U.
mkdir -p "$TMP/pkgsrc" && echo hi >"$TMP/pkgsrc/hello" && echo apt >"$TMP/pkgsrc/apt"
pkg ubuntu apt 2.7.14 usr/bin/apt-get="$TMP/pkgsrc/apt"
pkg ubuntu hello 1.0 usr/bin/hello="$TMP/pkgsrc/hello"
sign_ubuntu() {  # sign_ubuntu SIGNER
  dist ubuntu noble Ubuntu "$1" main=pool/main/apt_2.7.14_all.deb,pool/main/hello_1.0_all.deb universe=
  dist ubuntu noble-updates Ubuntu "$1" main= universe=
  dist ubuntu-security noble-security Ubuntu "$1" main= universe=
}
sign_ubuntu ubuntu

serve_dir "$www"
url=$SERVED_URL
: >"$TMP/proxy.log"
net_server proxy "$TMP/proxy.log"
proxy_url=$NET_URL

# The machine: Debian "fixture", its Debian repositories signed by D (and the
# trusted one), apt.conf sending every request through the logging proxy.
root="$TMP/root"
export STACKBUILD_APT_ROOT=$root
mkdir -p "$root/etc/apt/sources.list.d" "$root/etc/apt/apt.conf.d" "$root/usr/share/keyrings"
printf 'ID=debian\nVERSION_CODENAME=fixture\n' >"$root/etc/os-release"
cp "$TMP/debian.gpg" "$root/usr/share/keyrings/debian-archive-keyring.gpg"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $url/debian
Suites: fixture fixture-updates
Components: main
Signed-By: $root/usr/share/keyrings/debian-archive-keyring.gpg
EOF
printf 'Acquire::http { Proxy "%s"; };\n' "$proxy_url" >"$root/etc/apt/apt.conf.d/80proxy"
export STACKBUILD_APT_MIRROR="$url/ubuntu" STACKBUILD_APT_SECURITY_MIRROR="$url/ubuntu-security"

mkdir -p "$TMP/recipe"
cat >"$TMP/recipe/u.yaml" <<'YAML'
stack: uk
layers:
  - {name: os, use: ubuntu, version: noble, packages: [hello]}
tags: ["uk:t"]
YAML
build() {  # build NAME STORE [EXPECTED_RC]
  : >"$TMP/proxy.log"
  expect_rc "${3:-0}" "$1" sb build "$TMP/recipe/u.yaml" -o "$TMP/layout-$1" --store "$2"
}
fetched() { grep -F "$url/$1" "$TMP/proxy.log"; }

check "no host keyring: Ubuntu's keyring comes from Debian's ubuntu-keyring (the machine's release first, then -backports) and the build verifies"
[[ ! -e $root/usr/share/keyrings/ubuntu-archive-keyring.gpg ]] || fail "the fake root has an Ubuntu keyring"
build pkg "$TMP/store-pkg"
fetched "debian/$keyring_deb" >/dev/null || fail "ubuntu-keyring's .deb was not fetched: $(cat "$TMP/proxy.log")"
line_of() { grep -n -F "$url/debian/dists/$1/" "$TMP/proxy.log" | head -1 | cut -d: -f1; }
[[ -n $(line_of fixture) && -n $(line_of fixture-updates) && $(line_of fixture) -lt $(line_of fixture-backports) &&
  $(line_of fixture-updates) -lt $(line_of fixture-backports) ]] ||
  fail "the machine's own release was not asked first: $(grep -F "$url/debian/dists/" "$TMP/proxy.log")"
! fetched evil >/dev/null || fail "the trusted repository was read: $(fetched evil)"
fetched ubuntu/dists/noble/InRelease >/dev/null || fail "the Ubuntu repository was not read"
grep -q "ubuntu-keyring 2099.1~bpo1" "$TMP/pkg.err" "$TMP/pkg.out" ||
  { show_output pkg; fail "the build does not say which package the keyring came from"; }
expect_ok unpack-pkg sb unpack "$TMP/layout-pkg:t" "$TMP/root-pkg" --store "$TMP/store-pkg"
[[ -f $TMP/root-pkg/usr/bin/hello ]] || fail "hello is not in the image"
sources="$TMP/root-pkg/etc/apt/sources.list.d/stackbuild.sources"
keyring=$(awk '/^Signed-By:/{print $2; exit}' "$sources")
[[ $keyring == /etc/apt/keyrings/ubuntu-archive-keyring.gpg ]] || fail "the image's sources name keyring '$keyring'"
cmp -s "$TMP/root-pkg$keyring" "$TMP/ubuntu.gpg" || fail "the image's keyring is not the package's"
if grep -rq "$TMP/store-pkg" "$sources"; then fail "the image's sources name the store: $(cat "$sources")"; fi

check "a second run with the same store reuses the keyring it keeps, asking Debian nothing; offline too"
build again "$TMP/store-pkg"
if fetched debian/ >/dev/null; then fail "Debian's repositories were read again: $(fetched debian/)"; fi
[[ $(manifest_digest "$TMP/layout-pkg" t) == $(manifest_digest "$TMP/layout-again" t) ]] || fail "the second image differs"
STACKBUILD_OFFLINE=1 build offline "$TMP/store-pkg"
[[ ! -s $TMP/proxy.log ]] || fail "an offline build fetched: $(cat "$TMP/proxy.log")"

check "the lockfile names the keyring by its usual path and the package it came from; --locked, from an empty store, builds the same image"
expect_ok lock sb lock "$TMP/recipe/u.yaml" --store "$TMP/store-pkg"
lock="$TMP/recipe/u.yaml.lock"
[[ $(json "$lock" 'sorted({r["keyring"] for r in j["points"][0]["apt"]["os"]["repositories"]})') == \
  "['/usr/share/keyrings/ubuntu-archive-keyring.gpg']" ]] || fail "the lockfile's keyrings: $(grep '"keyring' "$lock")"
grep -q '"keyring_from": "Debian.s ubuntu-keyring 2099.1~bpo1 (fixture-backports)"' "$lock" ||
  fail "the lockfile does not say where the keyring came from: $(grep '"keyring' "$lock")"
if grep -q "$TMP" "$lock"; then fail "the lockfile holds a path of this machine: $(grep "$TMP" "$lock" | head -3)"; fi
: >"$TMP/proxy.log"
expect_ok locked sb build "$TMP/recipe/u.yaml" --locked -o "$TMP/layout-locked" --store "$TMP/store-locked"
fetched "debian/$keyring_deb" >/dev/null || fail "--locked from an empty store did not fetch the keyring's package"
[[ $(manifest_digest "$TMP/layout-pkg" t) == $(manifest_digest "$TMP/layout-locked" t) ]] || fail "the --locked image differs"
rm "$lock"

check "a host keyring (the same key) is used, nothing of Debian's is fetched, and the image is the same"
cp "$TMP/ubuntu.gpg" "$root/usr/share/keyrings/ubuntu-archive-keyring.gpg"
build host "$TMP/store-host"
if fetched debian/ >/dev/null; then fail "Debian's repositories were read with a host keyring: $(fetched debian/)"; fi
[[ $(manifest_digest "$TMP/layout-pkg" t) == $(manifest_digest "$TMP/layout-host" t) ]] ||
  fail "the image built with the host's keyring differs from the one with the package's"

check "a host keyring without U is what counts: the build is refused, though Debian's package would verify"
cp "$TMP/other.gpg" "$root/usr/share/keyrings/ubuntu-archive-keyring.gpg"
build host-other "$TMP/store-host-other" 1
grep -q "signed by a key that is not in $root/usr/share/keyrings/ubuntu-archive-keyring.gpg" "$TMP/host-other.err" ||
  { show_output host-other; fail "not refused for the host keyring's key"; }
rm "$root/usr/share/keyrings/ubuntu-archive-keyring.gpg"

check "neither a host keyring nor the package in the machine's Debian repositories: exit 3, naming what to install"
dist debian fixture-backports "Debian Backports" debian main=
printf 'deb [trusted=yes] %s fixture main\n' "$url/evil" >"$root/etc/apt/sources.list.d/evil.list"
build none "$TMP/store-none" 3
grep -qF "$url/ubuntu/dists/noble/InRelease" "$TMP/none.err" || { show_output none; fail "the error does not name the repository"; }
grep -qF "$root/usr/share/keyrings/ubuntu-archive-keyring.gpg" "$TMP/none.err" ||
  { show_output none; fail "the error does not name the keyring file looked for"; }
grep -q "install Debian's ubuntu-keyring package" "$TMP/none.err" || { show_output none; fail "the error does not name ubuntu-keyring"; }
if fetched evil/pool >/dev/null; then fail "the trusted repository's ubuntu-keyring was fetched: $(fetched evil/pool)"; fi
[[ ! -e $TMP/layout-none/index.json ]] || fail "a refused build left an image"
rm "$root/etc/apt/sources.list.d/evil.list"

check "ubuntu-keyring's .deb altered after its index was signed: refused"
dist debian fixture-backports "Debian Backports" debian main=$keyring_deb
cp "$www/debian/$keyring_deb" "$TMP/good.deb"
python3 - "$www/debian/$keyring_deb" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[-1] ^= 1  # one bit of the last member: the same size, another sha256
open(sys.argv[1], "wb").write(b)
PY
build altered "$TMP/store-altered" 1
grep -q "sha256 mismatch for $url/debian/$keyring_deb" "$TMP/altered.err" ||
  { show_output altered; fail "not refused for its sha256"; }
grep -q "ubuntu-keyring" "$TMP/altered.err" || { show_output altered; fail "the error does not say it was ubuntu-keyring"; }
[[ ! -e $TMP/layout-altered/index.json ]] || fail "a refused build left an image"
cp "$TMP/good.deb" "$www/debian/$keyring_deb"

check "an Ubuntu repository signed by a key not in the package's keyring is refused"
sign_ubuntu other
build wrongkey "$TMP/store-wrongkey" 1
grep -q "refusing the repository: it is signed by a key that is not in" "$TMP/wrongkey.err" ||
  { show_output wrongkey; fail "not refused for its signer"; }
grep -q "ubuntu-keyring 2099.1~bpo1" "$TMP/wrongkey.err" || { show_output wrongkey; fail "the error does not say whose keyring"; }
[[ ! -e $TMP/layout-wrongkey/index.json ]] || fail "a refused build left an image"
pass
