#!/usr/bin/env bash
# stackbuild test, the versions check on images whose CUDA, cuDNN and NCCL come
# as NVIDIA's pip wheels (recipes/pytorch.yaml's layout): small images with a
# copy: layer laid out as pip lays out torch 2.7.0 (cu126) and the wheels it
# pulls in, made here (no network), labelled with the resolved versions. The
# right one passes; one with another cuDNN fails naming the file, what it has
# and what was expected; an image with no version anywhere reports the check
# skipped, saying why.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$TMP"

# wheels DIR CUDNN: the files of the wheels under DIR/usr/local/lib/python3.11/dist-packages.
wheels() {
  local site="$1/usr/local/lib/python3.11/dist-packages" cudnn=$2
  IFS=. read -r ma mi pa _ <<<"$cudnn"
  mkdir -p "$site"/nvidia/{cudnn,nccl,cuda_runtime}/include "$site/torch" \
    "$site/nvidia_cudnn_cu12-$cudnn.dist-info" "$site/nvidia_nccl_cu12-2.26.2.dist-info" \
    "$site/nvidia_cuda_runtime_cu12-12.6.77.dist-info"
  printf '#define CUDNN_MAJOR %s\n#define CUDNN_MINOR %s\n#define CUDNN_PATCHLEVEL %s\n' "$ma" "$mi" "$pa" \
    >"$site/nvidia/cudnn/include/cudnn_version.h"
  printf 'Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: %s\n' "$cudnn" \
    >"$site/nvidia_cudnn_cu12-$cudnn.dist-info/METADATA"
  printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 2\n' >"$site/nvidia/nccl/include/nccl.h"
  printf 'Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.26.2\n' \
    >"$site/nvidia_nccl_cu12-2.26.2.dist-info/METADATA"
  printf '#define CUDART_VERSION 12060\n' >"$site/nvidia/cuda_runtime/include/cuda_runtime_api.h"
  printf 'Metadata-Version: 2.1\nName: nvidia-cuda-runtime-cu12\nVersion: 12.6.77\n' \
    >"$site/nvidia_cuda_runtime_cu12-12.6.77.dist-info/METADATA"
  printf "__version__ = '2.7.0+cu126'\ndebug = False\ncuda: Optional[str] = '12.6'\n" >"$site/torch/version.py"
}

recipe() {  # $1: name, $2: the tree to copy
  cat >"$1.yaml" <<EOF
stack: $1
layers:
  - name: wheels
    copy:
      - {src: $2/, dst: /}
config:
  labels:
    dev.stackbuild.version.cuda: "12.6.3"
    dev.stackbuild.version.cudnn: "9.5.1.17"
    dev.stackbuild.version.nccl: "2.26.2"
    dev.stackbuild.version.pytorch: "2.7.0"
tags: ["$1:t"]
EOF
  expect_ok "build-$1" sb build "$1.yaml" -o "$TMP/L-$1" --store "$STORE" --compression none
}
wheels good 9.5.1.17
wheels badcudnn 9.1.0.70
mkdir -p empty/usr/local/lib/python3.11/dist-packages/numpy
echo "version = '2.2.6'" >empty/usr/local/lib/python3.11/dist-packages/numpy/version.py
recipe good "$TMP/good"
recipe badcudnn "$TMP/badcudnn"
recipe empty "$TMP/empty"
site=/usr/local/lib/python3.11/dist-packages

check "an image whose wheels are the resolved versions passes the versions check"
expect_ok good sb test "$TMP/L-good:t" --store "$STORE" --report good.json
grep -Eq "^passed +static: versions match the lockfile +cuda, cudnn, nccl, pytorch match in 7 files" "$TMP/good.out" ||
  { show_output good; fail "the versions check did not pass on the good image"; }

check "a cuDNN wheel of another version fails, naming file, found and expected"
expect_rc 1 badcudnn sb test "$TMP/L-badcudnn:t" --store "$STORE" --report bad.json
grep -Eq "^failed +static: versions match the lockfile +2 version mismatches" "$TMP/badcudnn.out" &&
  grep -q "cudnn: $site/nvidia/cudnn/include/cudnn_version.h has 9.1.0, expected 9.5.1.17" "$TMP/badcudnn.out" &&
  grep -q "cudnn: $site/nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA has 9.1.0.70, expected 9.5.1.17" \
    "$TMP/badcudnn.out" || { show_output badcudnn; fail "unclear failure for a cuDNN of another version"; }
python3 - <<'PY' || fail "the JSON report of the wrong cuDNN is wrong"
import json
r = {t["name"]: t for t in json.load(open("bad.json"))["results"]}
v = r["static: versions match the lockfile"]
assert v["outcome"] == "failed" and len(v["details"]) == 2 and all(d.startswith("cudnn: ") for d in v["details"]), v
PY

check "--expect overrides a label: the good image against another NCCL fails"
expect_rc 1 expect sb test "$TMP/L-good:t" --store "$STORE" --expect nccl=2.21.5
grep -q "nccl: $site/nvidia/nccl/include/nccl.h has 2.26.2, expected 2.21.5" "$TMP/expect.out" ||
  { show_output expect; fail "--expect nccl=2.21.5 did not fail on NCCL 2.26.2"; }

check "an image with no version anywhere reports the check skipped, saying why"
expect_ok empty sb test "$TMP/L-empty:t" --store "$STORE"
grep -Eq "^skipped +static: versions match the lockfile +no CUDA, cuDNN, NCCL or PyTorch version in the image" \
  "$TMP/empty.out" || { show_output empty; fail "no skipped versions check on an image without versions"; }
pass
