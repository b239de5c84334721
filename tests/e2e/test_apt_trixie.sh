#!/usr/bin/env bash
# Against the real Debian archive configured on this machine (needs the network,
# root and chroot; label e2e, not in the default run): a minimal trixie layer
# (Essential + apt + python3) resolves to the same package set as
# `apt-get install --simulate --no-install-recommends '?essential' apt python3`
# over the same repositories in an empty apt state; the image, unpacked and
# entered with chroot, runs python3 and dpkg -l (after dpkg --configure -a);
# two builds in different stores from the same lockfile give the same digest.
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
two=$("$SB" build $TMP/r/mini.yaml --locked --store "$TMP/store2" -o $TMP/out2 --progress plain 2>&1 | awk '/^mini:trixie/ {print $2}')
[[ -n "$one" && "$one" == "$two" ]] || fail "digests differ: '$one' vs '$two'"
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
pass
