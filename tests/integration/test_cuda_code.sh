#!/usr/bin/env bash
# `stackbuild cuda-code` on binaries nvcc really makes (skipped without nvcc): an
# executable, a shared library, an object, a static library and a raw .fatbin, each
# compiled for sm_80, sm_90 and compute_90's PTX, list exactly that; a file built for
# sm_86 alone lists only sm_86; a host binary has no GPU code; --json carries the same;
# a missing file, a source file and a directory fail naming the file, with no
# half-printed listing. Where cuobjdump is installed, its --list-elf/--list-ptx agree.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA/bin/nvcc
[[ -x $NVCC ]] || skip "no nvcc at $NVCC"
require_tool ar g++
cd "$TMP"

cat >k.cu <<'EOF'
__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }
extern "C" void launch(float* x) { scale<<<1, 32>>>(x, 2.0f); }
EOF
printf 'extern "C" void launch(float*);\nint main() { launch(nullptr); return 0; }\n' >main.cpp
G=(-gencode arch=compute_80,code=sm_80 -gencode "arch=compute_90,code=[sm_90,compute_90]")
"$NVCC" "${G[@]}" -Xcompiler -fPIC -c k.cu -o k.o
ar rcs libk.a k.o
"$NVCC" "${G[@]}" -shared -Xcompiler -fPIC k.cu -o libk.so
"$NVCC" "${G[@]}" k.cu main.cpp -o k
"$NVCC" "${G[@]}" --fatbin k.cu -o k.fatbin
"$NVCC" -gencode arch=compute_86,code=sm_86 -shared -Xcompiler -fPIC k.cu -o lib86.so

check "each kind of file lists sm_80 sm_90 compute_90"
expect_ok list sb cuda-code k.o libk.a libk.so k k.fatbin lib86.so /bin/sh
want="k.o: sm_80 sm_90 compute_90
libk.a: sm_80 sm_90 compute_90
libk.so: sm_80 sm_90 compute_90
k: sm_80 sm_90 compute_90
k.fatbin: sm_80 sm_90 compute_90
lib86.so: sm_86
/bin/sh: no GPU code"
[[ $(cat "$TMP/list.out") == "$want" ]] || { show_output list; fail "expected:
$want"; }

check "--json says the same"
expect_ok json sb cuda-code --json libk.so lib86.so
python3 - "$TMP/json.out" <<'PY' || fail "--json: $(cat "$TMP/json.out")"
import json, sys
got = json.load(open(sys.argv[1]))
assert got == [{"file": "libk.so", "sass": ["sm_80", "sm_90"], "ptx": ["compute_90"]},
               {"file": "lib86.so", "sass": ["sm_86"], "ptx": []}], got
PY

check "bad files fail naming the file, and nothing is listed"
for bad in missing.so k.cu .; do
  run_capture bad "$SB" cuda-code libk.so "$bad"
  [[ $RC == 1 ]] || { show_output bad; fail "cuda-code $bad: exit $RC, expected 1"; }
  [[ ! -s $TMP/bad.out ]] || { show_output bad; fail "cuda-code $bad printed a listing before failing"; }
  grep -q "error: .*$bad" "$TMP/bad.err" || { show_output bad; fail "cuda-code $bad: the error does not name it"; }
done
run_capture none "$SB" cuda-code
[[ $RC == 2 ]] || fail "cuda-code without files: exit $RC, expected 2"

CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "$CUDA/bin/cuobjdump")}
if [[ -x $CUOBJDUMP ]]; then
  check "cuobjdump agrees"
  for f in k.o libk.so k k.fatbin lib86.so; do
    elf=$("$CUOBJDUMP" --list-elf "$f" | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')
    ptx=$("$CUOBJDUMP" --list-ptx "$f" | grep -o 'sm_[0-9]*' | sed 's/sm_/compute_/' | sort -u | tr '\n' ' ')
    mine=$("$SB" cuda-code "$f")
    [[ "$f: ${elf}${ptx% }" == "$mine" || ("${elf}${ptx}" == "" && $mine == "$f: no GPU code") ]] ||
      fail "$f: cuobjdump lists '${elf}${ptx}', stackbuild cuda-code '$mine'"
  done
else
  say "no cuobjdump: not cross-checked"
fi
pass
