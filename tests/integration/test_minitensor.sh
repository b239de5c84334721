#!/usr/bin/env bash
# The example framework (examples/minitensor/) compiles inside an image stackbuild
# builds, for exactly the requested GPU archs (runs as root; skipped without the
# sandbox, or the host's CUDA toolkit (nvcc) with cuDNN, NCCL and cuBLAS, or a C++
# toolchain).
#
# The cuda-base is made of host files: examples/minitensor.yaml is extended by a
# recipe whose `os`, `cuda`, `dllibs` and `toolchain` layers (replace: true) are
# copy layers: a static busybox, the host's g++/binutils/make and C library
# development files (the files of the packages that hold them, `dpkg -L`), and
# /usr/local/cuda's compiler, headers and cudart/cuBLAS/cuDNN/NCCL libraries. The
# `minitensor` layer is the example recipe's own: its source kept at /opt/minitensor,
# built by its Makefile from TORCH_CUDA_ARCH_LIST (= the point's ${arch}).
# Checks, on the minitensor layer's blob: `stackbuild cuda-code` (our own fat-binary
# parser) lists sm_80 and sm_90 and nothing else, no PTX either, for --set
# arch=8.0,9.0, and only sm_86 for --set arch=8.6 (a rebuild of that layer alone:
# the base layers come from the cache); where cuobjdump is installed, its
# --list-elf must agree; /opt/minitensor/ARCHS says the same; the source stays in
# the image.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool dpkg-query g++ make tar
CUDA=/usr/local/cuda
[[ -x $CUDA/bin/nvcc ]] || skip "no CUDA toolkit at $CUDA (nvcc)"
for h in cudnn.h nccl.h cublas_v2.h; do [[ -f $CUDA/include/$h ]] || skip "no $h in $CUDA/include"; done
# cuobjdump cross-checks stackbuild's parser where it is installed (CUOBJDUMP, PATH, or the toolkit).
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "$CUDA/bin/cuobjdump")}
[[ -x $CUOBJDUMP ]] || { say "no cuobjdump: stackbuild cuda-code's listing is not cross-checked"; CUOBJDUMP=; }
cd "$TMP"

# --- the base: busybox, then the host toolchain's packages' files -----------------
make_busybox_root base
# The packages holding the compiler, binutils, make, the C/C++ headers and
# libraries, and the shared libraries all these programs (and CUDA's) load.
seeds=()
for t in g++ gcc cc as ld make; do seeds+=("$(command -v $t)"); done
for p in cc1plus cc1 collect2 lto-wrapper; do seeds+=("$(g++ -print-prog-name=$p)"); done
for f in liblto_plugin.so libstdc++.so libgcc_s.so crtbegin.o crt1.o libc.so libm.so; do
  seeds+=("$(g++ -print-file-name=$f)")
done
seeds+=(/usr/include/stdio.h /usr/include/linux/limits.h)
seeds+=("/usr/include/c++/$(g++ -dumpversion)/vector")
for exe in "${seeds[@]}" "$CUDA"/bin/* "$CUDA"/nvvm/bin/*; do
  [[ -f $exe && -x $exe ]] || continue
  ldd "$exe" 2>/dev/null | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' || true
done | sort -u >libs.txt
mapfile -t libs <libs.txt
queries=()  # each path as given and resolved, with and without /usr (merged /usr)
for f in "${seeds[@]}" "${libs[@]}"; do
  r=$(readlink -f "$f")
  queries+=("$f" "$r" "${f#/usr}" "${r#/usr}")
done
pkgs=$( (dpkg-query -S "${queries[@]}" 2>/dev/null || true) | cut -d: -f1 | tr ',' '\n' | tr -d ' ' | sort -u)
[[ -n $pkgs ]] || fail "no packages found for the host toolchain"
# shellcheck disable=SC2086
dpkg-query -L $pkgs | grep -Ev '^/usr/share/(doc|man|info|locale|lintian|bug|gdb)/' | sort -u |
  while read -r f; do if [[ (-L $f || -f $f) && ! -d $f ]]; then echo "${f#/}"; fi; done >files.txt
mkdir toolchain
tar -C / --no-recursion -cf - -T files.txt | tar -C toolchain -xpf -
[[ -x toolchain/usr/bin/make ]] || fail "the toolchain root has no make"
say "toolchain: $(echo $pkgs | wc -w) packages, $(wc -l <files.txt) files, $(du -sh toolchain | cut -f1)"

# CUDA: the compiler, headers, and the libraries minitensor links (hardlinked, not copied).
mkdir -p cudalib cudatop
for l in cudart cublas cublasLt cudnn nccl; do
  for f in "$CUDA"/lib64/lib$l.so*; do
    if [[ -L $f ]]; then cp -a "$f" cudalib/; else ln "$f" cudalib/ 2>/dev/null || cp "$f" cudalib/; fi
  done
done
ln -s lib cudatop/lib64  # as the toolkit lays itself out: lib64 -> lib, targets/<arch>/{include,lib} -> ../../

cat >t.yaml <<EOF2
extends: $SB_SOURCE_DIR/examples/minitensor.yaml
stack: minitensor-test
source_date_epoch: 1700000000
layers:
  - {name: os, replace: true, preserve_modes: true, copy: [{src: base/, dst: /}]}
  - name: cuda
    replace: true
    preserve_modes: true
    copy:
      - {src: $CUDA/bin/, dst: /usr/local/cuda/bin/}
      - {src: $CUDA/nvvm/, dst: /usr/local/cuda/nvvm/}
      - {src: $CUDA/include/, dst: /usr/local/cuda/include/}
      - {src: $CUDA/targets/, dst: /usr/local/cuda/targets/}
      - {src: cudatop/, dst: /usr/local/cuda/}
  - {name: dllibs, replace: true, preserve_modes: true, copy: [{src: cudalib/, dst: /usr/local/cuda/lib/}]}
  - {name: toolchain, replace: true, preserve_modes: true, copy: [{src: toolchain/, dst: /}]}
tests:  # cuda-base's check names \${cudnn}, which these copy layers do not resolve
  - {name: cudnn, run: "ls /usr/local/cuda/lib/libcudnn.so*"}
tags: ["minitensor:test"]
EOF2

# build ARCH OUT: builds the recipe for --set arch=ARCH into the layout OUT (uncompressed layers).
build() {
  expect_ok "build-$2" sb build t.yaml --set "arch=$1" --set cuda=13.0 --compression none -o "$2" --store "$STORE" --allow-host-paths \
    --catalog "$SB_SOURCE_DIR/layers"
}
# top_layer OUT DIR: extracts the image's top layer (the minitensor layer) into DIR.
top_layer() {
  local blob
  blob=$(python3 - "$1" <<'PY'
import json, sys
d = sys.argv[1]
blob = lambda dg: f"{d}/blobs/{dg.replace(':', '/')}"
idx = json.load(open(f"{d}/index.json"))
man = json.load(open(blob(idx["manifests"][0]["digest"])))
print(blob(man["layers"][-1]["digest"]))
PY
)
  mkdir -p "$2" && tar -C "$2" -xf "$blob"
}
# gpu_code LIB: the SASS (sm_XY) and PTX (compute_XY) `stackbuild cuda-code` lists,
# space-separated; with cuobjdump, fails unless its --list-elf names the same SASS.
gpu_code() {
  local code elf
  code=$("$SB" cuda-code "$1") || fail "stackbuild cuda-code $1 failed"
  code=${code#"$1: "}
  if [[ -n $CUOBJDUMP ]]; then
    elf=$("$CUOBJDUMP" --list-elf "$1" | grep -o 'sm_[0-9]*[af]\?' | sort -u | tr '\n' ' ' | sed 's/ $//')
    [[ $elf == "$(tr ' ' '\n' <<<"$code" | grep '^sm_' | tr '\n' ' ' | sed 's/ $//')" ]] ||
      fail "cuobjdump --list-elf $1 says '$elf', stackbuild cuda-code says '$code'"
  fi
  echo "$code"
}

check "the framework compiles in the image for arch 8.0,9.0"
start=$(date +%s)
build 8.0,9.0 out1
say "first build: $(($(date +%s) - start)) s"
top_layer out1 l1
lib=l1/usr/local/lib/libminitensor.so
[[ -f $lib ]] || { show_output build-out1; fail "the minitensor layer has no usr/local/lib/libminitensor.so"; }
[[ -x l1/usr/local/bin/minitensor_test ]] || fail "the minitensor layer has no usr/local/bin/minitensor_test"

check "the library carries exactly sm_80 and sm_90 (stackbuild cuda-code${CUOBJDUMP:+, cuobjdump --list-elf})"
got=$(gpu_code "$lib")
[[ $got == "sm_80 sm_90" ]] || fail "$lib: expected 'sm_80 sm_90', got '$got'"
[[ $(tr '\n' ' ' <l1/opt/minitensor/ARCHS | sed 's/ $//') == "sm_80 sm_90" ]] ||
  fail "/opt/minitensor/ARCHS says '$(cat l1/opt/minitensor/ARCHS)'"

check "the source stays in the image at /opt/minitensor, without the build directory"
for f in Makefile gencode.sh src/kernels.cu src/matmul.cpp src/conv.cpp src/allreduce.cpp include/minitensor/minitensor.hpp; do
  cmp -s "l1/opt/minitensor/$f" "$SB_SOURCE_DIR/examples/minitensor/$f" || fail "/opt/minitensor/$f differs from the example's"
done
[[ ! -e l1/opt/minitensor/build ]] || fail "/opt/minitensor/build is still in the image"
python3 - out1 >env.txt <<'PY'
import json, sys
d = sys.argv[1]
blob = lambda dg: f"{d}/blobs/{dg.replace(':', '/')}"
m = json.load(open(blob(json.load(open(f"{d}/index.json"))["manifests"][0]["digest"])))
print("\n".join(json.load(open(blob(m["config"]["digest"])))["config"]["Env"]))
PY
grep -qx 'MINITENSOR_ARCHS=8.0;9.0' env.txt || fail "the image config has no MINITENSOR_ARCHS=8.0;9.0: $(cat env.txt)"

check "another arch list gives other code, and rebuilds only the minitensor layer"
build 8.6 out2
grep -q 'layers: 5 (1 built, 4 from the cache)' build-out2.err ||
  { show_output build-out2; fail "expected only the minitensor layer to be rebuilt"; }
top_layer out2 l2
got=$(gpu_code l2/usr/local/lib/libminitensor.so)
[[ $got == "sm_86" ]] || fail "for arch 8.6: expected 'sm_86', got '$got'"
[[ $(cat l2/opt/minitensor/ARCHS) == "sm_86" ]] || fail "/opt/minitensor/ARCHS says '$(cat l2/opt/minitensor/ARCHS)'"
say "both builds: $(($(date +%s) - start)) s"
pass
