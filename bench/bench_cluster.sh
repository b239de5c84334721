#!/usr/bin/env bash
# The cost of fanning a release out over Slurm (issue 35): the wall time of
# `stackbuild cluster slurm --wait` (an array task per point, then the merge job)
# against one `stackbuild build --push-to` of the same points on this machine, each
# from an empty store into a fresh repository of one local registry (distribution 2.8,
# 127.0.0.1), and the seconds Slurm itself adds per point: an array of N tasks that run
# `true` and an afterok job, submitted and followed the way the fan-out is. The cluster
# is the single-node one of tests/integration/slurm_lib.sh (slurmctld, slurmd, munged as
# root) with SLOTS task slots (default: the cores). Points: N (default 6), each a copy
# layer of SIZE_MB (default 48) MiB of random bytes of its own over a shared one.
# Prints the times and the ratios; no bar is enforced (one node can only lose: the
# fan-out's point is many machines).
#   SB=build/stackbuild bash bench/bench_cluster.sh
#   SB=build/stackbuild bash bench/bench_cluster.sh --smoke   (3 points of 1 MiB; bench/lib.sh)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BENCH_NAME=bench_cluster
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
SB=${SB:-build/stackbuild}
SB=$(cd "$(dirname "$SB")" && pwd)/$(basename "$SB")
N=${N:-6} SIZE_MB=${SIZE_MB:-48} SLOTS=${SLOTS:-$(nproc)}
[[ $SMOKE == 1 ]] && { N=3; SIZE_MB=1; }
[[ $N =~ ^[1-9][0-9]*$ && $SIZE_MB =~ ^[0-9]+$ && $SLOTS =~ ^[1-9][0-9]*$ ]] || die "N, SIZE_MB, SLOTS must be numbers"
for t in docker-registry curl python3; do command -v $t >/dev/null || bench_skip "'$t' is not installed"; done
# shellcheck source=tests/integration/slurm_lib.sh
source "$BENCH_ROOT/tests/integration/slurm_lib.sh"
why=$(slurm_missing)
[[ -z $why ]] || bench_skip "$why"
fail() { die "$@"; }
skip() { bench_skip "$@"; }
W=$(mktemp -d /tmp/bench_cluster.XXXXXX)
trap 'slurm_stop; bench_registry_stop; rm -rf "$W"' EXIT

PORT=$(bench_port)
bench_registry_start "$W" "$PORT" || exit 1
REG=127.0.0.1:$PORT
slurm_start "$W/slurm" "$SLOTS"

R=$W/recipe
mkdir -p "$R"
python3 - "$R" "$N" "$SIZE_MB" <<'PY'
import os, random, sys
d, n, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(35)
open(os.path.join(d, "shared.bin"), "wb").write(r.randbytes(max(mb, 1) << 20))
for i in range(n):
    os.makedirs(os.path.join(d, f"p{i}"), exist_ok=True)
    open(os.path.join(d, f"p{i}", "data.bin"), "wb").write(r.randbytes(max(mb, 1) << 20))
with open(os.path.join(d, "bench.yaml"), "w") as f:
    f.write("stack: bench\nsource_date_epoch: 1700000000\nmatrix:\n  point: [%s]\n" %
            ", ".join(f"p{i}" for i in range(n)))
    f.write("layers:\n  - {name: shared, copy: [{src: shared.bin, dst: /opt/shared.bin}]}\n"
            "  - {name: own, copy: [{src: \"${point}/\", dst: /opt/own/}]}\n"
            "tags: [\"bench:${point}\"]\n")
PY
"$SB" lock "$R/bench.yaml" --store "$W/store-lock" --progress plain >"$W/lock.log" 2>&1 ||
  { cat "$W/lock.log" >&2; die "lock failed"; }

log "one build of $N points of $SIZE_MB MiB ..."
t0=$(bench_now)
"$SB" build "$R/bench.yaml" --locked --push-to "$REG/one" --store "$W/store-one" -o "$W/one" \
  --progress plain >"$W/one.log" 2>&1 || { tail -20 "$W/one.log" >&2; die "the one-machine build failed"; }
t1=$(bench_now)
log "the fan-out over $SLOTS Slurm slots ..."
(cd "$W" && "$SB" cluster slurm "$R/bench.yaml" --registry "$REG/fan" --store "$W/store-fan" -o "$W/jobs" \
  --wait --poll 0.2 --no-sbom --progress plain) >"$W/fan.log" 2>&1 || { tail -30 "$W/fan.log" >&2; die "the fan-out failed"; }
t2=$(bench_now)
digest() { curl -fsI -H 'Accept: application/vnd.oci.image.index.v1+json' "http://$REG/v2/$1/manifests/bench-matrix" |
  tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'; }
[[ -n $(digest one) && $(digest one) == "$(digest fan)" ]] || die "the fan-out's index differs from the one build's"

log "Slurm alone: $N tasks that run true, and an afterok job ..."
t3=$(bench_now)
array=$(sbatch --parsable --array=0-$((N - 1)) --output=/dev/null --wrap true)
after=$(sbatch --parsable --dependency=afterok:"$array" --output=/dev/null --wrap true)
running() { scontrol show job -o "$1" 2>/dev/null | grep -qE 'JobState=(PENDING|RUNNING|COMPLETING|CONFIGURING)'; }
while running "$array" || running "$after"; do sleep 0.2; done
scontrol show job -o "$after" | grep -q 'JobState=COMPLETED' || die "the no-op afterok job did not complete"
t4=$(bench_now)
# Both verify each image before pushing it (the gate of build --push-to), as a release does.
python3 - "$t0" "$t1" "$t2" "$t3" "$t4" "$N" "$SLOTS" <<'PY'
import sys
t0, t1, t2, t3, t4 = map(float, sys.argv[1:6])
n, slots = int(sys.argv[6]), int(sys.argv[7])
one, fan, noop = t1 - t0, t2 - t1, t4 - t3
print(f"bench_cluster: {n} points, {slots} slots: one build {one:.2f} s, fan-out {fan:.2f} s, "
      f"ratio fan-out/one build {fan / one:.2f}")
print(f"bench_cluster: Slurm adds {noop / n:.2f} s a point ({n} no-op tasks and an afterok job: {noop:.2f} s); "
      f"fan-out minus one build: {(fan - one) / n:.2f} s a point")
PY
bench_smoke_note
