#!/usr/bin/env bash
# Installing torch and its nvidia-* wheels: stackbuild (`pip --layer` of the
# exact versions resolved first: unpack without pip and write the layer blob)
# against `pip install --no-deps` of the same wheel files into an empty
# --target. Both read the wheels from local disk: the download is done first
# (stackbuild's store is warm), and pip gets the same files from the store.
# Prints both times and the ratio. Needs ~3 GB of downloads and ~12 GB of disk.
#   bash bench/bench_pip.sh [REQUIREMENT]      (default torch)
#   bash bench/bench_pip.sh --smoke            (no network: torchy and its two
#       dependencies from tests/integration/pip_index.py's index on 127.0.0.1,
#       a fresh store; bench/lib.sh)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BENCH_NAME=bench_pip
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
SB=${SB:-build/stackbuild}
req=${1:-torch}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-pip.XXXXXX")
trap 'bench_server_stop; rm -rf "$work"' EXIT
store=${STORE:-$work/store}
if [[ $SMOKE == 1 ]]; then
  python3 -m pip --version >/dev/null 2>&1 || bench_skip "no pip for python3"
  command -v curl >/dev/null || bench_skip "'curl' is not installed"
  python3 "$BENCH_ROOT/tests/integration/pip_index.py" "$work/index" || die "pip_index.py failed"
  bench_serve_dir "$work/index" || die "no index server"
  # Only this index: neither the machine's pip.conf nor its environment.
  export PIP_INDEX_URL=$BENCH_SERVED_URL/simple PIP_CONFIG_FILE=/dev/null
  unset STACKBUILD_PIP_INDEX_URL PIP_EXTRA_INDEX_URL
  req=torchy store=$work/store
fi
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
glibc=$(ldd --version | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')

echo "resolving and fetching $req (not timed)..."
"$SB" pip --store "$store" --progress plain --python "$py" --glibc "$glibc" --lock "$req" >"$work/lock.json"
"$SB" pip --store "$store" --progress plain --python "$py" --glibc "$glibc" --target "$work/warm" "$req" >/dev/null
rm -rf "$work/warm"
mkdir -p "$work/wheels"
python3 - "$work/lock.json" "$store" "$work/wheels" <<'PY'
import json, os, sys
lock, store, out = sys.argv[1:]
for w in json.load(open(lock)):
    os.link(os.path.join(store, "blobs", "sha256", w["sha256"]), os.path.join(out, w["filename"]))
PY
# The timed run asks for exactly the resolved versions (the index pages are
# cached in the store by the warm-up; the layer itself is not).
mapfile -t pinned < <(python3 -c 'import json, sys
for w in json.load(open(sys.argv[1])): print(w["name"] + "==" + w["version"])' "$work/lock.json")
n=$(find "$work/wheels" -name "*.whl" | wc -l)
size=$(du -sh "$work/wheels" | cut -f1)
echo "$n wheels, $size"

sync
t0=$(date +%s.%N)
"$SB" pip --store "$store" --progress plain --python "$py" --glibc "$glibc" --layer "${pinned[@]}" >"$work/layer.out"
t1=$(date +%s.%N)
python3 -m pip install --no-deps --no-index --no-compile --disable-pip-version-check -q --target "$work/pip" "$work"/wheels/*.whl
t2=$(date +%s.%N)
python3 - "$t0" "$t1" "$t2" <<'PY'
import sys
t0, t1, t2 = map(float, sys.argv[1:])
sb, pip = t1 - t0, t2 - t1
print(f"stackbuild pip --layer (unpack + layer blob): {sb:.1f} s")
print(f"pip install --no-deps --target:        {pip:.1f} s")
print(f"ratio pip/stackbuild: {pip / sb:.2f}x")
PY
bench_smoke_note
