#!/usr/bin/env bash
# Build time of a recipe point for linux/arm64 against linux/amd64 on this amd64 machine
# (issue 36): the arm64 image's apt, pip and copy layers are assembled without running
# anything of arm64, so it should take about as long as the amd64 one (the goal: within
# 1.5x), where a QEMU-based builder runs the package managers emulated.
#
#   SB=build/stackbuild bash bench/bench_arm64.sh [RECIPE]   (default recipes/cuda-base-wheels.yaml)
#   SB=build/stackbuild bash bench/bench_arm64.sh --smoke     (copy layers of a tiny tree; bench/lib.sh)
#
# ROUNDS rounds (default 3), each building the point (ONLY, default "cuda=13.2") once per
# platform, the order rotating every round, each from an empty store of its own: what a
# fresh CI runner does, downloads included (from the machine's apt and pip configuration),
# --locked where the recipe has a lockfile. Checks that no layer of either ran emulated
# and that each platform's image is the same in every round.
# Prints each round, the medians and the ratio arm64 / amd64.
# Environment: SB, ROUNDS, ONLY, WORK (scratch; about 4 GB per store for the default).
# Not a test: run it by hand on a quiet machine (--smoke is, in the default test run).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
RECIPE=${1:-$here/../recipes/cuda-base-wheels.yaml}
bench_setup bench_arm64 "$(dirname "$RECIPE")" python3

only=()
if [[ $SMOKE == 1 ]]; then
  RECIPE=$W/smoke.yaml
  for a in amd64 arm64; do echo "built for $a" >"$W/$a.txt"; done
  cat >"$RECIPE" <<YAML
stack: smoke
source_date_epoch: 1700000000
matrix:
  platform: [linux/amd64, linux/arm64]
layers:
  - {name: tree, copy: [{src: smoke-src/, dst: /data/}]}
  - {name: arch, copy: [{src: "\${arch_name}.txt", dst: /etc/arch.txt}]}
tags: ["smoke:1"]
YAML
else
  [[ -f $RECIPE ]] || die "no recipe at $RECIPE"
  RECIPE=$(realpath "$RECIPE")
  read -r -a words <<<"${ONLY:-cuda=13.2}"
  for x in "${words[@]}"; do only+=(--only "$x"); done
fi
locked=()
[[ -f $RECIPE.lock ]] && locked=(--locked)

# build PLATFORM N: one build from an empty store; prints its seconds.
build() {
  local store=$W/store-$1-$2 out=$W/out-$1-$2 t0 t1
  t0=$(bench_now)
  "$SB" build "$RECIPE" "${only[@]}" --only "platform=linux/$1" "${locked[@]}" -o "$out" --store "$store" \
    --progress plain >"$W/$1-$2.log" 2>&1 || { tail -20 "$W/$1-$2.log" >&2; die "the linux/$1 build failed"; }
  t1=$(bench_now)
  ! grep -q "emulated" "$W/$1-$2.log" || die "a layer of linux/$1 ran emulated: $(grep -m1 emulated "$W/$1-$2.log")"
  # The image's digest: the same in every round (each from an empty store).
  python3 - "$out" "$1" >>"$W/digests-$1" <<'PY'
import json, os, sys
d, arch = sys.argv[1:]
for m in json.load(open(d + "/index.json"))["manifests"]:
    if m["annotations"]["org.opencontainers.image.ref.name"].endswith("-matrix"):
        continue
    if m["mediaType"].endswith("index.v1+json"):
        ix = json.load(open(os.path.join(d, "blobs", *m["digest"].split(":"))))
        m = [x for x in ix["manifests"] if x["platform"]["architecture"] == arch][0]
    print(m["digest"])
    break
PY
  rm -rf "$store" "$out"
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$t1"
}

log "recipe $(basename "$RECIPE") ${only[*]}, $ROUNDS rounds, each build from an empty store"
runs=()
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then a=$(build amd64 "$r"); b=$(build arm64 "$r"); else b=$(build arm64 "$r"); a=$(build amd64 "$r"); fi
  printf 'round %d: amd64 %6.2f s  arm64 %6.2f s\n' "$r" "$a" "$b"
  runs+=("$a $b")
done
python3 - "${runs[@]}" <<'PY'
import statistics, sys
runs = [tuple(map(float, r.split())) for r in sys.argv[1:]]
amd = statistics.median(r[0] for r in runs)
arm = statistics.median(r[1] for r in runs)
print(f"median: amd64 {amd:.2f} s, arm64 {arm:.2f} s")
print(f"bench_arm64: ratio arm64 / amd64 build time {arm / max(amd, 0.001):.2f} (goal: <= 1.5)")
PY
for a in amd64 arm64; do
  n=$(sort -u "$W/digests-$a" | wc -l)
  ((n == 1)) || die "linux/$a: $n different images from $ROUNDS builds from empty stores: $(sort -u "$W/digests-$a" | tr '\n' ' ')"
  echo "linux/$a: the same image from every empty store, $(head -1 "$W/digests-$a")"
done
bench_smoke_note
