#!/usr/bin/env bash
# Prints, for each torch version in layers/pytorch.yaml, the CUDA build of the
# wheel on the configured Python index and the NVIDIA wheels it pins, as
# resolved by `stackbuild pip` (so it uses the same index settings as builds):
#   VERSION cuNNN cuda-runtime=V cublas=V cudnn=V nccl=V
# Used when adding a torch version to the catalog (docs/howto-catalog.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
SB=${SB:-build/stackbuild}
python=${PYTHON_VERSION:-3.11} glibc=${GLIBC_VERSION:-2.36}
for v in $(grep -o '^  - version: "[0-9.]*"' layers/pytorch.yaml | grep -o '[0-9][0-9.]*' | sort -uV); do
  "$SB" pip --python "$python" --glibc "$glibc" "torch==$v" 2>/dev/null | awk -v v="$v" '
    /^nvidia-cuda-runtime/ { split($2, p, "."); build = "cu" p[1] p[2]; rt = $2 }
    /^nvidia-cublas/       { cublas = $2 }
    /^nvidia-cudnn/        { cudnn = $2 }
    /^nvidia-nccl/         { nccl = $2 }
    END { printf "%s %s cuda-runtime=%s cublas=%s cudnn=%s nccl=%s\n", v, build ? build : "cpu", rt, cublas, cudnn, nccl }'
done
