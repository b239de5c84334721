#!/usr/bin/env bash
# apt benchmarks (needs the network and root; mmdebstrap is installed if missing):
#  1. resolving python3 (+ Essential + apt) over trixie main, warm indexes both sides:
#     `stackbuild apt-resolve` against `apt-get install --simulate` on the same repositories;
#  2. building the minimal layer (cold store, .debs from the configured Debian mirror)
#     against `mmdebstrap --variant=essential --include=apt,python3`.
# Prints each time and the ratio (their time / ours; above 1 means stackbuild is faster).
set -euo pipefail
SB=${SB:-$(dirname "$0")/../build/stackbuild}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
codename=$(. /etc/os-release; echo "$VERSION_CODENAME")
D=$T/apt; mkdir -p $D/etc/apt/sources.list.d $D/etc/apt/apt.conf.d $D/etc/apt/preferences.d \
  $D/var/lib/apt/lists/partial $D/var/cache/apt/archives/partial $D/var/lib/dpkg
touch $D/var/lib/dpkg/status
sed "s/\b$codename\b/trixie/g" /etc/apt/sources.list.d/debian.sources > $D/etc/apt/sources.list.d/debian.sources
APT=(apt-get -q -o Dir=$D -o Dir::Etc=$D/etc/apt -o Dir::State::status=$D/var/lib/dpkg/status
     -o APT::Architecture=amd64 -o Debug::NoLocking=1)
"${APT[@]}" update >/dev/null
now() { date +%s.%N; }
best() {  # best of 3 runs of "$@", in seconds
  local b=999 s e
  for _ in 1 2 3; do s=$(now); "$@" >/dev/null 2>&1; e=$(now); b=$(echo "$e - $s" | bc -l | awk -v b=$b '{print ($1<b)?$1:b}'); done
  echo $b
}
"$SB" apt-resolve --store $T/store --release trixie --base python3 >/dev/null 2>&1  # warm the index cache
ours=$(best "$SB" apt-resolve --store $T/store --release trixie --base python3)
theirs=$(best "${APT[@]}" install --simulate --no-install-recommends '?essential' apt python3)
printf 'resolve python3: stackbuild %.2f s, apt-get --simulate %.2f s, ratio %.1fx\n' $ours $theirs $(echo "$theirs / $ours" | bc -l)

command -v mmdebstrap >/dev/null || apt-get install -y -q mmdebstrap >/dev/null
cat > $T/mini.yaml <<YAML
stack: mini
source_date_epoch: 1700000000
layers:
  - {name: os, use: debian, version: trixie, packages: [python3]}
YAML
s=$(now); "$SB" build $T/mini.yaml --store $T/cold -o $T/out >/dev/null 2>&1; e=$(now); ours=$(echo "$e - $s" | bc -l)
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
s=$(now); mmdebstrap --quiet --variant=essential --include=apt,python3 trixie $T/mm.tar "$mirror" >/dev/null 2>&1; e=$(now)
theirs=$(echo "$e - $s" | bc -l)
printf 'minimal layer: stackbuild %.2f s, mmdebstrap --variant=essential %.2f s, ratio %.1fx\n' $ours $theirs $(echo "$theirs / $ours" | bc -l)
