#!/usr/bin/env bash
# recipes/pytorch-debian.yaml (issue 37): PyTorch 2.6.0 from Debian's signed
# source package, against Debian's CUDA 12.4 toolkit, NCCL and system
# libraries. Its full build is hours on a large machine, so this test stops
# the build where the configuration is decided:
# - `plan` resolves the point to the catalog's `debian` builds of PyTorch and
#   NCCL (explicit records), with cuDNN 9.1.0.70 and Python 3.13;
# - the committed lockfile is current, and a --locked build from it of a copy
#   of the recipe whose pytorch layer stops setup.py after CMake's configure
#   (`build --cmake-only`) and three of its sources (cuDNN's frontend in
#   MHA.cpp, a CUDA kernel, flash attention's dispatch) succeeds: every layer below (Debian 13, NCCL from
#   contrib, ~310 build dependencies from main, contrib and non-free, dpkg
#   --configure, the cuDNN wheel) and the source tree, fetched from the
#   archive with every hash and signature checked; CMake finds nvcc 12.4 at
#   /usr/bin, the wheel's cuDNN 9.1.0, Debian's NCCL, BLAS and the point's
#   archs only, and nvcc 12.4 with cuda-g++ 13 compiles for sm_80, sm_86, sm_90;
# - the image keeps Debian's tree at /opt/pytorch, version 2.6.0+dfsg-7;
# - the tree equals `dpkg-source -x`'s of the same files
#   (test_debian_source_real.sh with SB_E2E_DEBIAN_SOURCES="pytorch bzip2"
#   SB_E2E_DEBIAN_SUITE=trixie does that comparison; it runs here too).
# Label e2e: downloads ~3.3 GB (SB_E2E_STORE=DIR keeps them between runs) and
# needs ~25 GB of disk; not in the default run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
source "$(dirname "$0")/../integration/lib.sh"
e2e_archive_build 25
recipe=$SB_SOURCE_DIR/recipes/pytorch-debian.yaml

check "plan: Debian's builds of PyTorch 2.6.0 and NCCL 2.22.3, CUDA 12.4.1, cuDNN 9.1.0.70, Python 3.13"
expect_ok plan sb plan "$recipe" --json
python3 - "$TMP/plan.out" <<'PY' || { show_output plan; fail "the plan is not Debian's build"; }
import json, sys
points = json.load(open(sys.argv[1]))["points"]
assert len(points) == 1, points
r = points[0]["resolved"]
assert r["builds"]["pytorch"] == "debian" and r["builds"]["nccl"] == "debian", r["builds"]
v = r["versions"]
assert (v["pytorch"], v["cuda"], v["nccl"], v["cudnn"], v["python"]) == ("2.6.0", "12.4.1", "2.22.3", "9.1.0.70", "3.13"), v
PY

check "the committed lockfile is current"
STACKBUILD_OFFLINE=1 expect_ok check sb lock "$recipe" --check

check "a --locked build up to CMake's configure and three sources: every layer below and the source; CMake finds CUDA, cuDNN and NCCL; nvcc compiles"
R=$TMP/r
mkdir -p "$R"
cp "$recipe.lock" "$R/pytorch-debian.yaml.lock"
python3 - "$recipe" "$R/pytorch-debian.yaml" "$(date +%s%N)" <<'PY'
import sys
text = open(sys.argv[1]).read()
steps = ('        - python3 setup.py bdist_wheel\n'
         '        - python3 -m pip install --no-deps --no-index dist/*.whl\n'
         '        - rm -rf build dist torch.egg-info\n')
assert steps in text, "the recipe's last steps changed: update this test"
# CMake's configure, then three of PyTorch's own sources: cuDNN's frontend
# (MHA.cpp), a CUDA kernel and flash attention's dispatch (.cu, for each arch).
objs = r"(native/cudnn/MHA\.cpp|native/cuda/ActivationGeluKernel\.cu|native/transformers/cuda/attention\.cu)\.o:"
configure = ('        - python3 setup.py build --cmake-only\n'
             '        - grep -E "^(CUDNN_LIBRARY_PATH|CUDNN_INCLUDE_PATH|NCCL_INCLUDE_DIR|NCCL_LIBRARIES|BLAS_LIBRARIES'
             '|CMAKE_CUDA_COMPILER|TORCH_CUDA_ARCH_LIST|USE_CUDNN|USE_SYSTEM_NCCL):" build/CMakeCache.txt\n'
             "        - 'ninja -C build -t targets all | grep -E \"%s\" | cut -d: -f1 > build/objs.txt; cat build/objs.txt'\n"
             '        - test "$(wc -l < build/objs.txt)" = 3 && ninja -C build -j"$(nproc)" $(cat build/objs.txt)\n'
             '        - rm -rf build torch.egg-info\n') % objs
env = '        PIP_BREAK_SYSTEM_PACKAGES: "1"\n'
assert env in text, "the recipe's build env changed: update this test"
# A value of this run's in the layer's env: its cache key is new, so the steps run (and print) each time.
text = text.replace(env, env + '        SB_E2E_RUN: "%s"\n' % sys.argv[3])
open(sys.argv[2], "w").write(text.replace(steps, configure))
PY
start=$SECONDS
sb build "$R/pytorch-debian.yaml" --locked -o "$TMP/out" --store "$S" >"$TMP/build.out" 2>&1 ||
  fail "the configure build failed: $(grep -v '^warning' "$TMP/build.out" | tail -40)"
say "built the layers, configured and compiled three sources in $((SECONDS - start)) s"
want=(
  "pytorch | --     CUDA version        : 12.4"
  "pytorch | --     cuDNN version       : 9.1.0"
  "pytorch | --     NVCC executable     : /usr/bin/nvcc"
  "pytorch | --     USE_SYSTEM_NCCL     : ON"
  "pytorch | CUDNN_LIBRARY_PATH:FILEPATH=/usr/local/lib/python3.13/dist-packages/nvidia/cudnn/lib/libcudnn.so"
  "pytorch | NCCL_INCLUDE_DIR:PATH=/usr/include"
  "pytorch | TORCH_CUDA_ARCH_LIST:UNINITIALIZED=8.0;8.6;9.0"
  "Building CXX object caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cudnn/MHA.cpp.o"
  "Building CUDA object caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/ActivationGeluKernel.cu.o"
  "Building CUDA object caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/transformers/cuda/attention.cu.o"
)
for line in "${want[@]}"; do
  grep -qF -- "$line" "$TMP/build.out" || fail "the configure output lacks '$line': $(grep -E 'CMake (Error|Warning)' -A5 "$TMP/build.out" | head -20)"
done
if grep -q 'BLAS_LIBRARIES.*NOTFOUND\|CMake Error' "$TMP/build.out"; then
  fail "CMake reported an error: $(grep -A8 'CMake Error' "$TMP/build.out" | head -20)"
fi

check "the image keeps Debian's patched tree at /opt/pytorch"
ref=$(json "$TMP/plan.out" 'j["points"][0]["tags"][0].split(":", 1)[1]')
expect_ok unpack sb unpack "$TMP/out:$ref" "$TMP/root" --store "$S"
head -1 "$TMP/root/opt/pytorch/debian/changelog" | grep -q '^pytorch (2.6.0+dfsg-7)' ||
  fail "/opt/pytorch/debian/changelog: $(head -1 "$TMP/root/opt/pytorch/debian/changelog")"
[[ -f $TMP/root/opt/pytorch/debian/patches/series && -f $TMP/root/opt/pytorch/setup.py ]] || fail "no Debian tree at /opt/pytorch"
[[ ! -e $TMP/root/opt/pytorch/build ]] || fail "the configure's build/ was kept in the image"
rm -rf "$TMP/root"

check "the fetch-and-patch of Debian's pytorch equals dpkg-source -x's (test_debian_source_real)"
rc=0
SB_E2E_DEBIAN_SOURCES="pytorch bzip2" SB_E2E_DEBIAN_SUITE=trixie TEST_NAME=test_debian_source_real \
  bash "$HERE/../e2e/test_debian_source_real.sh" || rc=$?
(( rc == 0 )) || fail "test_debian_source_real with pytorch exited $rc"
pass
