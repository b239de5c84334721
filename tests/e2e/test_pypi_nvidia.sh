#!/usr/bin/env bash
# Against the configured Python index (pip's configuration on this machine):
# the cuDNN and NCCL wheels at the versions the resolver chooses for CUDA 12.4
# in recipes/cuda-base.yaml, installed without pip; every ELF library in them
# resolves (ldd), each loads with ctypes, and `pip check` is clean.
# Label e2e: downloads ~1 GB (SB_E2E_STORE=DIR keeps the wheels between runs); not in the default run.
source "$(dirname "$0")/../integration/lib.sh"
require_tool ldd
python3 -m pip --version >/dev/null 2>&1 || skip "no pip for python3"
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
glibc=$(ldd --version | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')

check "the resolver's cudnn and nccl for cuda 12.4 name their wheels in the catalog"
"$SB" plan "$SB_SOURCE_DIR/recipes/cuda-base.yaml" --set cuda=12.4 --json >"$TMP/plan.json" 2>/dev/null ||
  fail "stackbuild plan failed"
read -r cudnn nccl < <(python3 - "$TMP/plan.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        if "versions" in o and isinstance(o["versions"], dict) and "cudnn" in o["versions"]:
            return o["versions"]
        for v in o.values():
            r = find(v)
            if r: return r
    if isinstance(o, list):
        for v in o:
            r = find(v)
            if r: return r
versions = find(doc)
print(versions["cudnn"], versions["nccl"])
PY
)
[[ -n $cudnn && -n $nccl ]] || fail "no cudnn/nccl versions in the plan"
reqs=()
for c in cudnn nccl; do
  v=${!c}
  r=$(grep -o "nvidia-$c-cu12==${v%%-*}[0-9.]*" "$SB_SOURCE_DIR/layers/$c.yaml" | head -1)
  # A version as precise as its source (cudnn 9.17.0): the wheels under that prefix.
  [[ -n $r ]] || r="nvidia-$c-cu12==${v%%-*}.*"
  reqs+=("$r")
done
say "resolved for CUDA 12.4: cudnn $cudnn, nccl $nccl -> ${reqs[*]}"

check "stackbuild pip installs them for CPython $py / glibc $glibc"
sb pip --store "${SB_E2E_STORE:-$STORE}" --python "$py" --glibc "$glibc" --target "$TMP/root" "${reqs[@]}" >"$TMP/out" ||
  fail "stackbuild pip failed"
cat "$TMP/out"
site="$TMP/root/usr/local/lib/python$py/site-packages"

check "every library's dependencies resolve and each library loads"
libdirs=$(find "$site/nvidia" -type d -name lib | tr '\n' ':')
n=0
while IFS= read -r so; do
  n=$((n + 1))
  missing=$(LD_LIBRARY_PATH=$libdirs ldd "$so" 2>&1 | grep 'not found' || true)
  [[ -z $missing ]] || fail "$so: $missing"
  LD_LIBRARY_PATH=$libdirs python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$so" || fail "ctypes cannot load $so"
done < <(find "$site/nvidia" -name 'lib*.so*' -type f)
(( n > 0 )) || fail "no libraries installed"
say "$n libraries resolve and load"

check "pip check is clean"
python3 -m venv --without-pip "$TMP/venv" || skip "python3 -m venv is missing"
mkdir -p "$TMP/pipdir" && cp -r "$(python3 -c 'import pip, os; print(os.path.dirname(pip.__file__))')" "$TMP/pipdir/"
out=$(PYTHONPATH="$site:$TMP/pipdir" "$TMP/venv/bin/python" -m pip check 2>&1) || fail "pip check: $out"
python3 -m pip list --path "$site" --format freeze
pass
