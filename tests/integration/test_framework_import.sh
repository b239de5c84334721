#!/usr/bin/env bash
# The built-in framework test's GPU-free part, "builtin: pytorch import", runs on
# every host: in an image of the host's python3 with a small stand-in `torch`
# package (version, torch.version.cuda, cuDNN and NCCL versions as PyTorch reports
# them), the test passes and names the versions when they equal the image's
# resolved ones (dev.stackbuild.version.* labels, or --expect), fails naming the
# component when one differs, fails with the import error when the framework
# cannot be imported; the GPU part ("builtin: pytorch") is reported skipped.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool ldd python3
cd "$TMP"
# Debian's python3 (the package is a test dependency), not one on PATH from pyenv.
[[ -x /usr/bin/python3 ]] || skip "no /usr/bin/python3"
PY=$(readlink -f /usr/bin/python3)
PYLIB=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
[[ -d $PYLIB && $PYLIB == /usr/lib/python3* ]] || skip "python3's standard library is not under /usr/lib ($PYLIB)"

# The standard library without the extension modules that need libraries
# beyond python3's own (ssl, sqlite, ...): the static check would miss them.
pylibs=$(ldd "$PY" | awk '/=> \// {print $1}')
mkdir -p stdlib && cp -a "$PYLIB"/. stdlib/ && rm -rf stdlib/test stdlib/site-packages stdlib/dist-packages
for so in stdlib/lib-dynload/*.so; do
  for need in $(ldd "$so" | awk '/=> \// {print $1}'); do
    grep -qxF "$need" <<<"$pylibs" || { rm -f "$so"; break; }
  done
done

# A stand-in for torch: what the test reads, nothing more.
fake_torch() {  # $1: dir, $2: cuda, $3: cudnn (int), $4: nccl (tuple)
  mkdir -p "$1/usr/lib/python3/dist-packages/torch/backends" "$1/usr/lib/python3/dist-packages/torch/cuda"
  cat >"$1/usr/lib/python3/dist-packages/torch/__init__.py" <<EOF
__version__ = "2.7.0+fake"
from . import version, backends, cuda
EOF
  echo "cuda = '$2'" >"$1/usr/lib/python3/dist-packages/torch/version.py"
  cat >"$1/usr/lib/python3/dist-packages/torch/backends/__init__.py" <<EOF
class _Cudnn:
    def version(self): return $3
class _Matmul:
    allow_tf32 = True
class _Cuda:
    matmul = _Matmul()
cudnn, cuda = _Cudnn(), _Cuda()
EOF
  cat >"$1/usr/lib/python3/dist-packages/torch/cuda/__init__.py" <<EOF
class _Nccl:
    def version(self): return $4
nccl = _Nccl()
def is_available(): return False
def device_count(): return 0
EOF
}

recipe() {  # $1: stack, $2: the torch tree ("" for none)
  {
    echo "stack: $1"
    echo "source_date_epoch: 1700000000"
    echo "layers:"
    echo "  - name: python"
    echo "    copy:"
    echo "      - {src: $PY, dst: /usr/bin/python3}"
    echo "      - {src: stdlib/, dst: $PYLIB/}"
    ldd "$PY" | awk '/=> \// {print $3} !/=>/ && $1 ~ /^\// {print $1}' | while read -r lib; do
      echo "      - {src: $(readlink -f "$lib"), dst: $lib}"
    done
    [[ -z $2 ]] || { echo "  - name: torch"; echo "    copy: [{src: $2/, dst: /}]"; }
    echo "config:"
    echo "  env: {PATH: /usr/bin:/bin}"
    echo "  labels:"
    echo "    dev.stackbuild.tests: '{\"tests\": [], \"builtin\": [\"pytorch\"]}'"
    echo "    dev.stackbuild.version.cuda: \"12.6.3\""
    echo "    dev.stackbuild.version.cudnn: \"9.5.1.17\""
    echo "    dev.stackbuild.version.nccl: \"2.26.2\""
    echo "tags: [\"$1:$1\"]"
  } >"$1.yaml"
  expect_ok "build-$1" sb build "$1.yaml" -o "$TMP/L" --store "$STORE" --compression none --allow-host-paths
}
fake_torch good "12.6" 90501 "(2, 26, 2)"
fake_torch badcudnn "12.6" 90100 "(2, 26, 2)"
fake_torch badnccl "12.6" 90501 "(2, 21, 5)"
recipe good good
recipe badcudnn badcudnn
recipe badnccl badnccl
recipe notorch ""

outcome() { python3 -c 'import json,sys; r={t["name"]: t for t in json.load(open(sys.argv[1]))["results"]}; t=r[sys.argv[2]]; print(t["outcome"], "|", t.get("message", ""))' "$1" "$2"; }

check "the import test passes without a GPU and names the versions; the GPU part is skipped"
expect_ok good sb test "$TMP/L:good" --store "$STORE" --report good.json
got=$(outcome good.json "builtin: pytorch import")
[[ $got == "passed | cuda 12.6, cudnn 9.5.1, nccl 2.26.2, version 2.7.0+fake" ]] || { show_output good; fail "import test: $got"; }
got=$(outcome good.json "builtin: pytorch")
[[ $got == "skipped | no NVIDIA GPU on this host" ]] || fail "GPU part: $got"

check "a framework built against another cuDNN fails, naming both versions"
expect_rc 1 badcudnn sb test "$TMP/L:badcudnn" --store "$STORE" --report badcudnn.json
[[ $(outcome badcudnn.json "builtin: pytorch import") == failed* ]] || fail "a wrong cuDNN passed"
grep -q "cudnn 9.1.0, the image was resolved with 9.5.1.17" "$TMP/badcudnn.out" ||
  { show_output badcudnn; fail "the failure does not name the cuDNN versions"; }

check "another NCCL fails the same way"
expect_rc 1 badnccl sb test "$TMP/L:badnccl" --store "$STORE"
grep -q "nccl 2.21.5, the image was resolved with 2.26.2" "$TMP/badnccl.out" ||
  { show_output badnccl; fail "the failure does not name the NCCL versions"; }

check "a resolved version with a packaging revision (NVIDIA's apt NCCL 2.26.2-1) is the library's 2.26.2"
expect_ok revision sb test "$TMP/L:good" --store "$STORE" --expect nccl=2.26.2-1
expect_rc 1 revision2 sb test "$TMP/L:good" --store "$STORE" --expect nccl=2.26.3-1
grep -q "nccl 2.26.2, the image was resolved with 2.26.3-1" "$TMP/revision2.out" ||
  { show_output revision2; fail "another NCCL with a revision passed"; }

check "--expect overrides a label: the good image against another CUDA fails"
expect_rc 1 expect sb test "$TMP/L:good" --store "$STORE" --expect cuda=12.8
grep -q "cuda 12.6, the image was resolved with 12.8" "$TMP/expect.out" ||
  { show_output expect; fail "--expect did not reach the built-in test"; }

check "an image whose framework does not import fails with the import error"
expect_rc 1 notorch sb test "$TMP/L:notorch" --store "$STORE"
grep -q "No module named 'torch'" "$TMP/notorch.out" || { show_output notorch; fail "no import error shown"; }
pass
