#!/usr/bin/env bash
# apt benchmarks (needs the network and root; mmdebstrap is installed if missing):
#  1. resolving python3 (+ Essential + apt) over trixie main, warm indexes both sides:
#     `stackbuild apt-resolve` against `apt-get install --simulate` on the same repositories;
#  2. building the minimal layer (cold store, .debs from the configured Debian mirror)
#     against `mmdebstrap --variant=essential --include=apt,python3`.
# Prints each time and the ratio (their time / ours; above 1 means stackbuild is faster).
#   bash bench/bench_apt.sh
#   bash bench/bench_apt.sh --smoke
# --smoke: no network; the repository is a signed one of fake packages (Essential
# base-files, libc6, apt, python3) made with tests/integration/apt_lib.sh and served on
# 127.0.0.1, named to stackbuild by STACKBUILD_APT_SOURCES and to apt-get and mmdebstrap
# by the same sources file; one run each instead of the best of 3. mmdebstrap runs
# --variant=extract there: its essential variant installs with dpkg run inside the new
# root, and a root of fake packages has no dpkg, shell or libc to run ("Could not exec
# dpkg!"); extract downloads and unpacks the same packages without running anything.
# Exits 77 (skipped) when a tool or root is missing; installs nothing (bench/lib.sh).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BENCH_NAME=bench_apt
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
SB=${SB:-$(dirname "$0")/../build/stackbuild}
T=$(mktemp -d); trap 'bench_server_stop; rm -rf "$T"' EXIT
RUNS=3
D=$T/apt; mkdir -p "$D"/etc/apt/sources.list.d "$D"/etc/apt/apt.conf.d "$D"/etc/apt/preferences.d \
  "$D"/var/lib/apt/lists/partial "$D"/var/cache/apt/archives/partial "$D"/var/lib/dpkg
touch "$D"/var/lib/dpkg/status

# fixture_repo: the smoke's repository (apt_lib.sh's mkdeb and publish, which write under
# $TMP and $www and call fail); sets SOURCES, a deb822 file naming it with its key.
fixture_repo() {
  TMP=$T www=$T/www
  fail() { die "$*"; }
  chmod 755 "$T"   # apt's _apt user reads the key (mktemp made T private)
  # shellcheck source=tests/integration/apt_lib.sh
  source "$BENCH_ROOT/tests/integration/apt_lib.sh"
  export GNUPGHOME=$T/gnupg
  mkdir -m 700 "$GNUPGHOME"
  gpg --batch --passphrase '' --quick-gen-key 'Fixture <fixture@example.invalid>' ed25519 sign never 2>/dev/null ||
    die "gpg could not make a key"
  gpg --batch --export >"$T/key.gpg"
  mkdeb debian base-files 13 "" etc/debian_version
  mkdeb debian libc6 2.41 "" usr/lib/x86_64-linux-gnu/libc.so.6
  mkdeb debian apt 3.0 "libc6 (>= 2.41)" usr/bin/apt-get
  mkdeb debian python3 3.13 "libc6 (>= 2.41)" usr/bin/python3
  # base-files is Essential, so that --base and '?essential' each add a package.
  local deb=$www/debian/pool/base-files_13_amd64.deb
  dpkg-deb -R "$deb" "$T/bf" || die "could not unpack $deb"
  echo "Essential: yes" >>"$T/bf/DEBIAN/control"
  dpkg-deb --root-owner-group -Zgzip --build "$T/bf" "$deb" >/dev/null || die "could not rebuild $deb"
  publish debian inrelease
  bench_serve_dir "$www" || die "no repository server"
  SOURCES=$T/fixture.sources
  printf 'Types: deb\nURIs: %s/debian\nSuites: test\nComponents: main\nSigned-By: %s\n' \
    "$BENCH_SERVED_URL" "$T/key.gpg" >"$SOURCES"
}

if [[ $SMOKE == 1 ]]; then
  for t in dpkg-deb gpg gpgv gzip sha256sum curl bc apt-get mmdebstrap; do
    command -v "$t" >/dev/null || bench_skip "'$t' is not installed"
  done
  [[ $(id -u) -eq 0 ]] || bench_skip "mmdebstrap's root mode needs root"
  RUNS=1
  fixture_repo
  cp "$SOURCES" "$D"/etc/apt/sources.list.d/fixture.sources
  export STACKBUILD_APT_SOURCES=$SOURCES   # stackbuild's repositories: the fixture alone
else
  codename=$(. /etc/os-release; echo "$VERSION_CODENAME")
  sed "s/\b$codename\b/trixie/g" /etc/apt/sources.list.d/debian.sources > "$D"/etc/apt/sources.list.d/debian.sources
fi
APT=(apt-get -q -o "Dir=$D" -o "Dir::Etc=$D/etc/apt" -o "Dir::State::status=$D/var/lib/dpkg/status"
     -o APT::Architecture=amd64 -o Debug::NoLocking=1)
"${APT[@]}" update >/dev/null
now() { date +%s.%N; }
best() {  # best of $RUNS runs of "$@", in seconds; a failed run is an error
  local b=999 s e
  for _ in $(seq "$RUNS"); do
    s=$(now)
    "$@" >"$T/best.log" 2>&1 || { cat "$T/best.log" >&2; die "failed: $*"; }
    e=$(now)
    b=$(echo "$e - $s" | bc -l | awk -v b="$b" '{print ($1<b)?$1:b}')
  done
  echo "$b"
}
"$SB" apt-resolve --store "$T/store" --release trixie --base python3 >/dev/null 2>&1  # warm the index cache
ours=$(best "$SB" apt-resolve --store "$T/store" --release trixie --base python3)
theirs=$(best "${APT[@]}" install --simulate --no-install-recommends '?essential' apt python3)
printf 'resolve python3: stackbuild %.2f s, apt-get --simulate %.2f s, ratio %.1fx\n' "$ours" "$theirs" \
  "$(echo "$theirs / $ours" | bc -l)"

if [[ $SMOKE != 1 ]]; then
  command -v mmdebstrap >/dev/null || apt-get install -y -q mmdebstrap >/dev/null
fi
cat > "$T"/mini.yaml <<YAML
stack: mini
source_date_epoch: 1700000000
layers:
  - {name: os, use: debian, version: trixie, packages: [python3]}
YAML
s=$(now)
"$SB" build "$T"/mini.yaml --store "$T"/cold -o "$T"/out >"$T/build.log" 2>&1 ||
  { cat "$T/build.log" >&2; die "the minimal layer did not build"; }
e=$(now); ours=$(echo "$e - $s" | bc -l)
if [[ $SMOKE == 1 ]]; then
  variant=extract suite=test mirror=$SOURCES
  include=$(awk '/^Package:/ {p = $2} /^Essential: yes/ {print p}' \
    "$www"/debian/dists/test/main/binary-amd64/Packages | paste -sd,),apt,python3
else
  variant=essential suite=trixie include=apt,python3
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
s=$(now)
mmdebstrap --variant="$variant" --include="$include" "$suite" "$T"/mm.tar "$mirror" >"$T/mm.log" 2>&1 ||
  { tail -40 "$T/mm.log" >&2; die "mmdebstrap failed"; }
e=$(now)
theirs=$(echo "$e - $s" | bc -l)
printf 'minimal layer: stackbuild %.2f s, mmdebstrap --variant=%s %.2f s, ratio %.1fx\n' "$ours" "$variant" "$theirs" \
  "$(echo "$theirs / $ours" | bc -l)"
bench_smoke_note
