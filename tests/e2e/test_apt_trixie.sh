#!/usr/bin/env bash
# Against the real Debian archive configured on this machine (needs the network,
# root and chroot; label e2e, not in the default run): a minimal trixie layer
# (Essential + apt + python3) resolves to the same package set as
# `apt-get install --simulate --no-install-recommends '?essential' apt python3`
# over the same repositories in an empty apt state; the image, unpacked and
# entered with chroot, runs python3 and dpkg -l (after dpkg --configure -a);
# two builds in different stores from the same lockfile, the second 40 days
# later (faketime), give the same digest; in the image apt-get installs a
# package (from the archive when the chroot reaches it, else --simulate over
# the indexes fetched above) and removes one.
source "$(dirname "$0")/../integration/lib.sh"
require_tool apt-get chroot gpgv
[[ $(id -u) == 0 ]] || skip "needs root for chroot"
codename=$(. /etc/os-release; echo "${VERSION_CODENAME:-}")
[[ -n "$codename" && -f /etc/apt/sources.list.d/debian.sources ]] || skip "no deb822 Debian sources on this machine"

check "apt-resolve matches apt-get --simulate"
D=$TMP/apt; mkdir -p $D/etc/apt/sources.list.d $D/etc/apt/apt.conf.d $D/etc/apt/preferences.d \
  $D/var/lib/apt/lists/partial $D/var/cache/apt/archives/partial $D/var/lib/dpkg
touch $D/var/lib/dpkg/status
sed "s/\b$codename\b/trixie/g" /etc/apt/sources.list.d/debian.sources > $D/etc/apt/sources.list.d/debian.sources
APT=(apt-get -q -o Dir=$D -o Dir::Etc=$D/etc/apt -o Dir::State::status=$D/var/lib/dpkg/status
     -o APT::Architecture=amd64 -o Debug::NoLocking=1)
"${APT[@]}" update >/dev/null 2>&1 || skip "the configured Debian mirror is not reachable"
"${APT[@]}" install --simulate --no-install-recommends '?essential' apt python3 | awk '/^Inst/ {print $2}' | sort > $TMP/apt.txt
"$SB" apt-resolve --store "$STORE" --progress plain --release trixie --base --names python3 2>/dev/null | sort > $TMP/sb.txt
diff $TMP/apt.txt $TMP/sb.txt || fail "package sets differ (< apt-get, > stackbuild)"
say "$(wc -l < $TMP/sb.txt) packages, the same set"

check "lock, build twice from the lock in two stores: same digest"
mkdir -p $TMP/r && cat > $TMP/r/mini.yaml <<YAML
stack: mini
source_date_epoch: 1700000000
layers:
  - {name: os, use: debian, version: trixie, packages: [python3]}
tags: ["mini:trixie"]
YAML
"$SB" lock $TMP/r/mini.yaml --store "$STORE" --progress plain >/dev/null 2>&1 || fail "lock failed"
grep -q '"sha256"' $TMP/r/mini.yaml.lock || fail "the lockfile pins no package"
one=$("$SB" build $TMP/r/mini.yaml --locked --store "$STORE" -o $TMP/out1 --progress plain 2>&1 | awk '/^mini:trixie/ {print $2}')
later=()
if command -v faketime >/dev/null; then later=(faketime '+40 days'); else say "faketime is not installed: both builds today"; fi
two=$("${later[@]}" "$SB" build $TMP/r/mini.yaml --locked --store "$TMP/store2" -o $TMP/out2 --progress plain 2>&1 |
  awk '/^mini:trixie/ {print $2}')
[[ -n "$one" && "$one" == "$two" ]] || fail "digests differ: '$one' vs '$two' (second build: ${later[*]:-today})"
say "image $one"

check "chroot: python3 and dpkg -l work"
"$SB" unpack $TMP/out1:trixie $TMP/rootfs --store "$STORE" >/dev/null 2>&1 || fail "unpack failed"
for d in "null 1 3" "zero 1 5" "urandom 1 9"; do set -- $d; mknod -m 666 $TMP/rootfs/dev/$1 c $2 $3; done
[[ $(chroot $TMP/rootfs /usr/bin/python3 -c 'print(1)') == 1 ]] || fail "python3 did not run"
chroot $TMP/rootfs dpkg -l python3 | grep -q '^.. *python3 ' || fail "dpkg -l does not list python3"
PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot $TMP/rootfs dpkg --configure -a > $TMP/configure.log 2>&1 ||
  { tail -20 $TMP/configure.log; fail "dpkg --configure -a failed"; }
n=$(chroot $TMP/rootfs dpkg -l | grep -c '^ii')
[[ $n == $(wc -l < $TMP/sb.txt) ]] || fail "$n packages configured, expected $(wc -l < $TMP/sb.txt)"
PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot $TMP/rootfs apt-get check >/dev/null || fail "apt-get check failed"

check "chroot: apt-get installs a package and removes one"
IN=(env PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive chroot $TMP/rootfs)
cp /etc/resolv.conf $TMP/rootfs/etc/resolv.conf 2>/dev/null || true
if timeout 300 "${IN[@]}" apt-get -q update > $TMP/update.log 2>&1; then
  "${IN[@]}" apt-get install -y --no-install-recommends less > $TMP/install.log 2>&1 ||
    { tail -20 $TMP/install.log; fail "apt-get install less failed in the image"; }
  "${IN[@]}" less --version | grep -q less || fail "less does not run after apt-get install"
else  # no network in the chroot: the indexes fetched above, and --simulate
  say "apt-get update failed in the chroot ($(tail -1 $TMP/update.log)); simulating over the host's indexes"
  cp $D/var/lib/apt/lists/*Packages* $D/var/lib/apt/lists/*Release* $TMP/rootfs/var/lib/apt/lists/ ||
    fail "no indexes to copy"
  "${IN[@]}" apt-get install --simulate --no-install-recommends less > $TMP/install.log 2>&1 ||
    { tail -20 $TMP/install.log; fail "apt-get install --simulate less failed in the image"; }
  grep -q '^Inst less ' $TMP/install.log || { cat $TMP/install.log; fail "apt-get would not install less"; }
fi
"${IN[@]}" apt-get remove -y python3 > $TMP/remove.log 2>&1 || { tail -20 $TMP/remove.log; fail "apt-get remove python3 failed"; }
"${IN[@]}" dpkg -l python3 | grep -q '^ii' && fail "python3 is still installed after apt-get remove"
"${IN[@]}" dpkg -l python3-minimal | grep -q '^ii' || fail "apt-get remove python3 took python3-minimal with it"
pass
