#!/usr/bin/env bash
# Rebuild times of a 5-layer recipe with build steps: nothing changed, and the top
# layer edited.
#
#   bash bench/bench_rebuild.sh
#   bash bench/bench_rebuild.sh --smoke     (200 files, N=1, no bar enforced; bench/lib.sh)
#
# The recipe: a copy layer (the host's static busybox and ~2,000 small files) and four
# step layers on it, each running a short script in the sandbox. After one cold build:
#   no-change: `stackbuild build` again, best and median of $N runs; the bar is well
#              under a second (the layer cache: hashing the recipe and the copy
#              layer's files, no sandbox, no compression);
#   top-edit:  the top layer's script edited (a new value each run), median of $N: the
#              top layer alone is rebuilt (its steps run, its layer is written).
# Prints the figures and checks the build summaries ("0 built" / "1 built").
# Environment: SB (default: build/stackbuild of this checkout), N (runs, default 5),
# STRICT=1 (exit 1 when the no-change median is not under 1 s; not with --smoke). Needs
# root (the sandbox) and /bin/busybox (busybox-static). Not a test: run it by hand
# (--smoke is, in the default test run).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
BENCH_NAME=bench_rebuild
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
SB=${SB:-$here/../build/stackbuild}
N=${N:-5}
FILES=2000
if [[ $SMOKE == 1 ]]; then N=1 FILES=200 STRICT=; fi
die() { printf 'bench_rebuild: %s\n' "$*" >&2; exit 1; }
[[ -x "$SB" ]] || die "no stackbuild at $SB (set SB=...)"
[[ $(id -u) -eq 0 ]] || bench_skip "the build sandbox needs root here"
[[ -x /bin/busybox ]] || bench_skip "/bin/busybox is missing (apt-get install busybox-static)"

WORK=$(mktemp -d /tmp/bench_rebuild.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
mkdir -p base/bin base/data
cp /bin/busybox base/bin/
for a in sh echo cat mkdir seq; do ln -s busybox "base/bin/$a"; done
for i in $(seq "$FILES"); do echo "file $i" >"base/data/f$i"; done

recipe() {  # recipe TOP-VALUE
  cat <<EOF
stack: bench
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - {name: one,   build: {run: "mkdir -p /out && echo one >/out/one"}}
  - {name: two,   build: {run: "for i in \$(seq 100); do echo \$i >/out/two-\$i; done"}}
  - {name: three, build: {env: {V: "3"}, run: "echo \$V >/out/three"}}
  - {name: top,   build: {run: "echo $1 >/out/top"}}
EOF
}

now() { date +%s.%N; }
# timed LABEL EXPECT: one build of recipe.yaml, its seconds on stdout; fails unless the
# summary line holds EXPECT.
timed() {
  local t0 t1
  t0=$(now)
  "$SB" build recipe.yaml -o out --store store --progress plain >"$1.out" 2>"$1.err" ||
    { cat "$1.err" >&2; die "$1: the build failed"; }
  t1=$(now)
  grep -q -- "$2" "$1.err" || { cat "$1.err" >&2; die "$1: expected '$2' in the summary"; }
  echo "$t1 - $t0" | bc -l
}
stats() { sort -n | awk '{a[NR]=$1} END {printf "best %.3f s, median %.3f s", a[1], a[int((NR+1)/2)]}'; }

recipe 0 >recipe.yaml
cold=$(timed cold "(5 built, 0 from the cache)")
for i in $(seq "$N"); do timed "same-$i" "(0 built, 5 from the cache)"; done >same.txt
for i in $(seq "$N"); do recipe "$i" >recipe.yaml; timed "edit-$i" "(1 built, 4 from the cache)"; done >edit.txt

printf 'bench_rebuild: 5 layers (1 copy of %s files, 4 with build steps)\n' "$(find base -type f | wc -l)"
printf '  cold build:        %.3f s\n' "$cold"
printf '  no-change rebuild: %s   (bar: well under 1 s)\n' "$(stats <same.txt)"
printf '  top layer edited:  %s   (rebuilds the top layer alone)\n' "$(stats <edit.txt)"
median=$(sort -n same.txt | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
bench_smoke_note
if [[ "${STRICT:-}" == 1 ]] && (($(echo "$median >= 1" | bc -l))); then die "no-change median $median s is not under 1 s"; fi
