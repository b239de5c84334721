#!/usr/bin/env bash
# Against the real Debian archive configured on this machine (needs the network
# and root; label e2e, not in the default run; downloads about 2 MB): two
# source packages of the machine's release, `hello` (an orig tarball with its
# upstream .asc signature, a debian tarball, patches) and `bzip2` (a quilt
# series of patches), kept in an image on a busybox base through `source:
# {debian: NAME}`, are unpacked and patched exactly as `dpkg-source -x`
# unpacks the same files fetched by `apt-get source --download-only` (through
# a temp apt configuration with deb-src lines made from this machine's): the
# same version, contents, modes and links, but for quilt's .pc/ bookkeeping.
# With debian-keyring installed, each .dsc's uploader signature is checked
# and the build names the key. The lockfile then pins them and a --locked
# build from an empty store gives the same image. SB_E2E_DEBIAN_SOURCES="NAME NAME" names two others (trixie's
# pytorch-vision, say, with SB_E2E_DEBIAN_SUITE=trixie). A mirror that does
# not serve a package's files (apt-get source gets a 404) is a skip.
source "$(dirname "$0")/../integration/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../integration/sandbox_lib.sh
source "$HERE/sandbox_lib.sh"
require_sandbox
require_tool apt-get dpkg-source gpgv
codename=$(. /etc/os-release; echo "${VERSION_CODENAME:-}")
[[ -n "$codename" && -f /etc/apt/sources.list.d/debian.sources ]] || skip "no deb822 Debian sources on this machine"
cd "$TMP"

check "apt-get source --download-only fetches the packages (deb-src from this machine's sources)"
D=$TMP/apt; mkdir -p $D/etc/apt/sources.list.d $D/etc/apt/apt.conf.d $D/etc/apt/preferences.d \
  $D/var/lib/apt/lists/partial $D/var/cache/apt/archives/partial $D/var/lib/dpkg
touch $D/var/lib/dpkg/status
suite=${SB_E2E_DEBIAN_SUITE:-$codename}
read -r -a packages <<<"${SB_E2E_DEBIAN_SOURCES:-hello bzip2}"
(( ${#packages[@]} == 2 )) || fail "SB_E2E_DEBIAN_SOURCES names two packages"
sed -e "s/\b$codename\b/$suite/g" -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
  > $D/etc/apt/sources.list.d/debian.sources
APT=(apt-get -q -o Dir=$D -o Dir::Etc=$D/etc/apt -o Dir::State::status=$D/var/lib/dpkg/status
     -o APT::Architecture=amd64 -o Debug::NoLocking=1)
"${APT[@]}" update >/dev/null 2>&1 || skip "the configured Debian mirror is not reachable"
mkdir -p ref
for p in "${packages[@]}"; do
  (cd ref && "${APT[@]}" source --download-only "$p" >"$TMP/apt-$p.log" 2>&1) ||
    if grep -q '404' "$TMP/apt-$p.log"; then
      skip "the configured mirror does not serve all of $p's files: $(grep -m1 '^E:' "$TMP/apt-$p.log")"
    else
      fail "apt-get source --download-only $p failed: $(tail -3 "$TMP/apt-$p.log")"
    fi
done
ls ref/*.dsc >/dev/null || fail "apt-get fetched no .dsc"

make_busybox_root base
cat >real.yaml <<YAML
stack: dsrc
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: one
    source: {debian: ${packages[0]}, suite: $suite}
    keep_source: /opt/one
    build: {run: ["true"]}
  - name: two
    source: {debian: ${packages[1]}, suite: $suite}
    keep_source: /opt/two
    build: {run: ["true"]}
tags: ["dsrc:1"]
YAML

listing() { (cd "$1" && find . -path ./.pc -prune -o -printf '%y %m %p %l\n' | sort -k3); }

check "the trees stackbuild prepares are dpkg-source -x's of the same files"
start=$SECONDS
expect_ok build sb build real.yaml -o out --store "$STORE"
say "built in $((SECONDS - start)) s"
expect_ok unpack sb unpack out:1 rootfs --store "$STORE"
for pair in "${packages[0]}:one" "${packages[1]}:two"; do
  p=${pair%%:*} at=${pair#*:}
  dsc=$(ls ref/${p}_*.dsc)
  (cd ref && dpkg-source -x "$(basename "$dsc")" "x-$p" >/dev/null 2>&1) || fail "dpkg-source -x $dsc failed"
  diff -r --no-dereference --exclude=.pc "ref/x-$p" "rootfs/opt/$at" >"$TMP/diff-$p" ||
    { head -20 "$TMP/diff-$p"; fail "$p: the trees differ (< dpkg-source -x, > stackbuild)"; }
  diff <(listing "ref/x-$p") <(listing "rootfs/opt/$at") >"$TMP/modes-$p" ||
    { head -20 "$TMP/modes-$p"; fail "$p: modes or links differ (< dpkg-source -x, > stackbuild)"; }
  version=$(awk '/^Version:/ {print $2; exit}' "$dsc")
  grep -q "\"version\":\"$version\"" <(python3 - out <<'PY'
import json, sys
d = sys.argv[1]; b = lambda dg: f"{d}/blobs/{dg.replace(':', '/')}"
m = json.load(open(b(json.load(open(f"{d}/index.json"))["manifests"][0]["digest"])))
for k, v in json.load(open(b(m["config"]["digest"])))["config"]["Labels"].items():
    if k.startswith("dev.stackbuild.source."): print(json.dumps(json.loads(v)["debian"], separators=(",", ":")))
PY
) || fail "$p: the image label does not name version $version"
  say "$p $version: $(listing "rootfs/opt/$at" | wc -l) paths, as dpkg-source -x unpacks them"
done

if [[ -f /usr/share/keyrings/debian-keyring.gpg ]]; then
  check "with debian-keyring installed, each .dsc's uploader signature is checked, and the build names the key"
  for p in "${packages[@]}"; do
    line=$(grep -o "Debian $p [^ ]* (.dsc [^)]*)" "$TMP/build.err" || true)
    say "${line:-$p: no uploader line}"
    [[ $line == *"(.dsc signed by "* ]] || fail "$p: the uploader signature was not checked"
  done
else
  say "no debian-keyring here: the uploader signatures are not checked (apt-get install debian-keyring)"
fi

check "lock pins them; --locked from an empty store gives the same image"
expect_ok lock sb lock real.yaml --store "$STORE"
expect_ok locked sb build real.yaml --locked -o out-locked --store "$TMP/store2"
[[ $(manifest_digest out 1) == $(manifest_digest out-locked 1) ]] || fail "--locked from an empty store gave another image"

pass
