#!/usr/bin/env bash
# The built-in CUDA test programs compiled against an image's own CUDA, without a GPU:
# an image made of the host toolkit's headers and libcudart (and what libcudart needs)
# records the built-in test `cuda`; `test --compile-builtins` compiles the device query
# with the host nvcc against the image's headers and checks the binary needs the
# image's libcudart, while the GPU test itself is reported skipped. An image whose
# libcudart is of another version fails the compile check, naming both.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$NVCC" ]] || skip "no nvcc (the CUDA toolkit) on this machine"
require_tool ldd
CUDA=$(cuda_root_of "$NVCC")
CUDART=$(ls "$CUDA"/lib64/libcudart.so.[0-9]* 2>/dev/null | head -1)
[[ -n "$CUDART" && -d "$CUDA/include" ]] || skip "no libcudart.so.N or include/ under $CUDA"
SONAME=$(basename "$CUDART")
cd "$TMP"

recipe() {  # $1: name, $2: the name libcudart gets in the image
  {
    echo "stack: $1"
    echo "layers:"
    echo "  - name: cuda"
    echo "    copy:"
    echo "      - {src: $CUDA/include/, dst: /usr/local/cuda/include/}"
    echo "      - {src: $(readlink -f "$CUDART"), dst: /usr/local/cuda/lib64/$2}"
    ldd "$CUDART" | awk '/=> \// {print $3} !/=>/ && $1 ~ /^\// {print $1}' | while read -r lib; do
      echo "      - {src: $(readlink -f "$lib"), dst: $lib}"
    done
    echo "config:"
    echo "  env: {LD_LIBRARY_PATH: /usr/local/cuda/lib64}"
    echo "  labels: {dev.stackbuild.tests: '{\"tests\": [], \"builtin\": [\"cuda\"]}'}"
    echo "tags: [\"$1:$1\"]"
  } >"$1.yaml"
  expect_ok "build-$1" sb build "$1.yaml" -o "$TMP/L" --store "$STORE" --compression none --allow-host-paths
}
recipe same "$SONAME"
recipe other libcudart.so.7

check "the device query compiles with the host nvcc against the image's headers and needs the image's libcudart"
expect_ok same sb test "$TMP/L:same" --store "$STORE" --compile-builtins --nvcc "$NVCC" --report same.json
python3 - "$SONAME" "$NVCC" <<'PY' || { show_output same; fail "the compile check or the skipped GPU test is wrong"; }
import json, sys
r = {t["name"]: t for t in json.load(open("same.json"))["results"]}
c = r["builtin: compile cuda"]
assert c["outcome"] == "passed", c
assert c["message"] == f"host nvcc {sys.argv[2]}; needs {sys.argv[1]}, the image's /usr/local/cuda/lib64/{sys.argv[1]}", c
t = r["builtin: cuda"]
assert t["outcome"] == "skipped" and t["message"] == "no NVIDIA GPU on this host", t
PY
bin=$(find "$STORE/builtin-tests" -type f -name cuda | head -1)
[[ -n "$bin" ]] || fail "no compiled program in the store's builtin-tests"
readelf -d "$bin" | grep -q "NEEDED.*\[$SONAME\]" || fail "the compiled program does not need $SONAME"

check "a second run takes the compiled program from the store"
n=$(find "$STORE/builtin-tests" -type f -name cuda | wc -l)
expect_ok again sb test "$TMP/L:same" --store "$STORE" --compile-builtins --nvcc "$NVCC"
[[ $(find "$STORE/builtin-tests" -type f -name cuda | wc -l) == "$n" ]] || fail "the program was compiled again"

check "an image whose libcudart is another version fails the compile check, naming both"
expect_rc 1 other sb test "$TMP/L:other" --store "$STORE" --compile-builtins --nvcc "$NVCC"
grep -Eq "^failed +builtin: compile cuda +the program compiled by host nvcc .* needs $SONAME, which the image lacks \(it has libcudart.so.7\)" \
  "$TMP/other.out" || { show_output other; fail "unclear failure for a libcudart of another version"; }
pass
