#!/usr/bin/env bash
# A release fanned out over a real single-node Slurm cluster (issue 35): slurmctld,
# slurmd and munged from Debian's packages, run as root in $TMP (slurm_lib.sh), and the
# real registry (distribution 2.8) on 127.0.0.1. `stackbuild cluster slurm` submits a
# job array of three offline points (copy layers, each with its own content) and an
# afterok merge job. Checked:
#   - a task cancelled (scancel) half-way through its push fails the run, naming its
#     point and log; the registry stays consistent (every tag's manifests and blobs are
#     whole) and the point is not there;
#   - the re-run submits only that point and completes;
#   - the matrix index in the registry has the digest a one-machine `build --push-to`
#     of the same recipe gives, and so has each point's manifest; the notes are
#     written; each point has its SBOM attached;
#   - a third run submits nothing;
#   - `merge` of a repository the tasks never pushed to fails naming the point and tag;
#   - `merge --sign` signs the index, and `stackbuild verify` accepts it;
#   - the recipe's directory name holds a space, quotes and $(...): nothing runs it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
source "$HERE/slurm_lib.sh"
require_registry
why=$(slurm_missing)
[[ -z $why ]] || skip "$why"
trap 'rc=$?; slurm_stop; stop_fixtures; cleanup; exit $rc' EXIT

start_registry plain
REG="127.0.0.1:$REG_PORT"
slurm_start "$TMP/slurm" 4

R="$TMP/recipe dir \$(touch PWNED) 'q\""
mkdir -p "$R"/data-{a,b,c} "$TMP/work"
echo shared >"$R/common.txt"
for f in a b c; do
  echo "flavor $f" >"$R/$f.txt"
  echo "data of $f" >"$R/data-$f/small.txt"
done
# Point b's 12 MiB of random bytes (gzip keeps them 12 MiB) make its push slow through
# the proxy below, so that the test can cancel its task half-way.
python3 -c 'import random,sys; open(sys.argv[1],"wb").write(random.Random(35).randbytes(12<<20))' "$R/data-b/big.bin"
cat >"$R/mx.yaml" <<'YAML'
stack: mx
source_date_epoch: 1700000000
matrix:
  flavor: [a, b, c]
layers:
  - {name: base, copy: [{src: common.txt, dst: /etc/common.txt}]}
  - {name: flavor, copy: [{src: "${flavor}.txt", dst: /etc/flavor.txt}]}
  - {name: data, copy: [{src: "data-${flavor}/", dst: /opt/data/}]}
tags: ["mx:${flavor}"]
cluster: {cpus: 1, memory: 256M, time: "10:00"}
YAML
expect_ok lock sb lock "$R/mx.yaml" --store "$STORE"

# The stackbuild the jobs run: on the first run, point b pushes through a proxy that
# forwards 1 MiB a second.
python3 "$HERE/slow_proxy.py" --upstream "$REG" --port-file "$TMP/slow.port" --rate $((1 << 20)) \
  --progress "$TMP/slow.sent" 2>"$TMP/slow.err" &
REG_PIDS+=($!)
SLOW=127.0.0.1:$(wait_port_file "$TMP/slow.port")
cat >"$TMP/sb-jobs" <<WRAPPER
#!/bin/bash
args=("\$@")
if [[ " \$* " == *" --only flavor=b "* && -e "$TMP/slow-b" ]]; then
  rm -f "$TMP/slow-b"
  echo "\${SLURM_ARRAY_JOB_ID}_\${SLURM_ARRAY_TASK_ID}" >"$TMP/b-task"
  for i in "\${!args[@]}"; do [[ \${args[i]} == "$REG/team/mx" ]] && args[i]="$SLOW/team/mx"; done
fi
exec "$SB" "\${args[@]}"
WRAPPER
chmod +x "$TMP/sb-jobs"
cluster() { in_dir "$TMP/work" sb cluster slurm "$R/mx.yaml" --registry "$REG/team/mx" --store "$STORE" \
  --stackbuild "$TMP/sb-jobs" --poll 0.5 "$@"; }
jobs_known() { scontrol show job -o 2>/dev/null | grep -c '^JobId=' || true; }

check "--dry-run prints the scripts and sbatch commands, submits nothing"
expect_ok dry cluster --dry-run -o "$TMP/jobs0"
grep -q '^sbatch --parsable --array=0-2 ' "$TMP/dry.out" || { show_output dry; fail "no sbatch --array=0-2 line"; }
grep -q -- '--dependency=afterok:' "$TMP/dry.out" || { show_output dry; fail "no afterok merge"; }
grep -q '^#SBATCH --mem=256M$' "$TMP/dry.out" || { show_output dry; fail "no #SBATCH --mem from cluster:"; }
[[ ! -e "$TMP/jobs0" && $(jobs_known) == 0 ]] || fail "--dry-run wrote or submitted something"

check "a task cancelled half-way through its push fails the run, naming its point and log"
touch "$TMP/slow-b"
cluster --wait -o "$TMP/jobs1" >"$TMP/run1.out" 2>"$TMP/run1.err" &
run1=$!
for _ in $(seq 600); do
  [[ -s "$TMP/b-task" && $(cat "$TMP/slow.sent") -gt $((2 << 20)) ]] && break
  sleep 0.1
done
[[ -s "$TMP/b-task" ]] || { cat "$TMP/run1.err" >&2; fail "point b's task never started"; }
sent=$(cat "$TMP/slow.sent")
((sent > (2 << 20) && sent < (12 << 20))) || fail "point b's push was not under way when cancelled ($sent bytes sent)"
say "cancelling task $(cat "$TMP/b-task") after $sent bytes of its push"
scancel "$(cat "$TMP/b-task")"
rc=0
wait "$run1" || rc=$?
[[ $rc == 1 ]] || { cat "$TMP/run1.out" "$TMP/run1.err" >&2; fail "the run exited $rc, expected 1"; }
grep -q "point flavor=b (task [0-9_]*, CANCELLED.*see $TMP/jobs1/logs/task-1.log" "$TMP/run1.err" ||
  { cat "$TMP/run1.err" >&2; fail "the error does not name point b and its log"; }
grep -q "1 of 3 tasks failed" "$TMP/run1.err" || { cat "$TMP/run1.err" >&2; fail "not 1 of 3 failed"; }

check "the registry is consistent after the cancel, without point b"
python3 "$HERE/registry_check.py" "$REG" team/mx >"$TMP/check1.out" 2>&1 || { cat "$TMP/check1.out" >&2; fail "inconsistent"; }
grep -q '^team/mx:a ' "$TMP/check1.out" && grep -q '^team/mx:c ' "$TMP/check1.out" ||
  { cat "$TMP/check1.out" >&2; fail "points a and c are not there"; }
if grep -q '^team/mx:b \|^team/mx:mx-matrix ' "$TMP/check1.out"; then
  cat "$TMP/check1.out" >&2
  fail "point b or the index is there after b's task was cancelled"
fi

check "the re-run submits point b alone and completes"
expect_ok run2 cluster --wait -o "$TMP/jobs2"
[[ $(json "$TMP/jobs2/points.json" '[p["point"] for p in j]') == "['flavor=b']" ]] ||
  fail "the re-run submitted $(json "$TMP/jobs2/points.json" '[p["point"] for p in j]')"
grep -q "summary (1 tasks, 2 already built" "$TMP/run2.err" || { show_output run2; fail "no summary of 1 task"; }
grep -Eq '^flavor=b +b +sha256:[0-9a-f]{12} +[0-9]+_0 +COMPLETED +0:0 ' "$TMP/run2.err" ||
  { show_output run2; fail "the summary has no row of point b with its manifest"; }

check "the index and every point have the digests of a one-machine build --push-to"
expect_ok ref sb build "$R/mx.yaml" --locked --sbom --push-to "$REG/team/ref" --store "$TMP/store-ref" -o "$TMP/ref"
digest_of() {
  curl -fsI -H 'Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json' \
    "http://$REG/v2/$1/manifests/$2" | tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'
}
for t in mx-matrix a b c; do
  want=$(digest_of team/ref "$t")
  got=$(digest_of team/mx "$t")
  [[ -n $want && $got == "$want" ]] || fail "$t: the fan-out pushed '$got', the one-machine build '$want'"
  say "$t: $got"
done
[[ "sha256:$(manifest_digest "$TMP/ref" mx-matrix)" == "$(digest_of team/mx mx-matrix)" ]] ||
  fail "the index differs from the one-machine build's layout"
python3 "$HERE/registry_check.py" "$REG" team/mx >"$TMP/check2.out" 2>&1 || { cat "$TMP/check2.out" >&2; fail "inconsistent"; }

check "the release notes are written, each point has its SBOM attached"
for t in mx:a mx:b mx:c; do grep -q "$t" "$TMP/jobs2/notes.md" || fail "the notes do not name $t"; done
for t in a b c; do
  d=$(digest_of team/mx "$t")
  curl -fs -H 'Accept: application/vnd.oci.image.index.v1+json' \
    "http://$REG/v2/team/mx/manifests/sha256-${d#sha256:}" >"$TMP/referrers-$t.json" || fail "point $t has no referrers"
  python3 - "$TMP/referrers-$t.json" <<'PY' || fail "point $t: no SPDX SBOM among its referrers"
import json, sys
types = [m.get("artifactType") for m in json.load(open(sys.argv[1]))["manifests"]]
assert "application/spdx+json" in types, types
assert "application/vnd.stackbuild.inputs.v1+json" in types, types
PY
done

check "a third run submits nothing"
before=$(jobs_known)
expect_ok run3 cluster --wait
grep -q "nothing to submit" "$TMP/run3.err" || { show_output run3; fail "the third run did not say it had nothing to submit"; }
[[ $(jobs_known) == "$before" ]] || fail "the third run submitted jobs ($before jobs before, $(jobs_known) after)"
[[ "$(digest_of team/mx mx-matrix)" == "$(digest_of team/ref mx-matrix)" ]] || fail "the third run changed the index"

check "merge of a repository the tasks never pushed to names the point, its tag, the task"
expect_rc 1 nomerge sb merge "$R/mx.yaml" --registry "$REG/team/none" --locked --store "$STORE"
grep -q "matrix point flavor=a: $REG/team/none:a is not in the registry: its task did not push it" "$TMP/nomerge.err" ||
  { show_output nomerge; fail "not the missing-point error"; }

check "merge --sign signs the index it pushed: stackbuild verify accepts it"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TMP/key.pem" 2>/dev/null
openssl pkey -in "$TMP/key.pem" -pubout -out "$TMP/key.pub"
expect_ok signed sb merge "$R/mx.yaml" --registry "$REG/team/mx" --locked --sign "$TMP/key.pem" --store "$STORE"
expect_ok verified sb verify "$REG/team/mx:mx-matrix" --key "$TMP/key.pub"
[[ "$(digest_of team/mx mx-matrix)" == "$(digest_of team/ref mx-matrix)" ]] || fail "signing changed the index"

check "nothing of the recipe's name was run by a shell"
[[ -z $(find "$TMP" -name PWNED 2>/dev/null) && ! -e /PWNED ]] || fail "a shell ran \$(touch PWNED)"
pass
