#!/usr/bin/env bash
# The GPU check: builds a small image from what is on this host and runs the
# GPU tests inside it, on the GPU, through stackbuild's sandbox with the
# driver injected. Needs no network: the programs compile with this host's
# CUDA toolkit, the image is made of this host's files, and stackbuild comes
# from build/gpu-bundle (tests/gpu/bundle.sh) or build/stackbuild.
# Prints a JSON summary last; exits 0 when every test passed, 77 when this
# host has no NVIDIA GPU (the GPU tests are then skipped, not passed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ -x "$repo/build/gpu-bundle/bin/stackbuild" ]]; then
  SB="$repo/build/gpu-bundle/bin/stackbuild"
  export LD_LIBRARY_PATH="$repo/build/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  SB="${SB:-$repo/build/stackbuild}"
fi
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# The toolkit's libraries (cuBLAS, cuDNN, NCCL) may sit outside the linker's
# default path; the programs find them there on the host, and in the image
# they go to /usr/lib/x86_64-linux-gnu.
# nvcc names its own toolkit directory (TOP): a wrapper on PATH such as
# /usr/local/bin/nvcc does not sit in it.
cuda_top=$("$NVCC" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
cuda_root=$(cd "${cuda_top:-$(dirname "$NVCC")/..}" && pwd -P)
cuda_libs=$(find "$cuda_root"/lib64 "$cuda_root"/lib "$cuda_root"/targets/*/lib -maxdepth 0 -type d 2>/dev/null | paste -sd:)
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cuda_libs"
work=$(mktemp -d /tmp/sb-gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
store="$work/store"
declare -a results=()
result() { results+=("{\"name\": \"$1\", \"outcome\": \"$2\", \"detail\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1][-2000:]))' "$3")}"); echo "$2: $1"; }
summary() {
  local IFS=,
  echo "{\"host\": \"$(hostname)\", \"results\": [${results[*]}]}"
}
[[ -x "$SB" ]] || { echo "no stackbuild at $SB (build it, or run tests/gpu/bundle.sh where it was built)"; exit 1; }
[[ -x "$NVCC" ]] || { echo "no nvcc on this host"; exit 1; }

# 1. The host: driver, GPUs, what would be injected.
"$SB" gpu --json > "$work/gpu.json" 2>&1
cat "$work/gpu.json"
has_gpu=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(1 if d.get("gpus") else 0)' "$work/gpu.json" 2>/dev/null || echo 0)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
cc=${cc:-9.0}
sm=${cc/./}

# 2. The test programs, for this GPU's arch (SASS) and as PTX; and a broken
#    build with SASS for another arch only.
mkdir -p "$work/img/opt/gputests" "$work/broken/opt/gputests"
for p in device_query gemm conv allreduce; do
  case $p in gemm) libs=-lcublas ;; conv) libs=-lcudnn ;; allreduce) libs=-lnccl ;; *) libs= ;; esac
  if "$NVCC" -O2 -gencode "arch=compute_$sm,code=[sm_$sm,compute_$sm]" -o "$work/img/opt/gputests/$p" \
      "$here/programs/$p.cu" $libs >"$work/nvcc.log" 2>&1; then
    result "compile $p for sm_$sm" passed ""
  else
    result "compile $p for sm_$sm" failed "$(cat "$work/nvcc.log")"
  fi
done
"$NVCC" -O2 -gencode arch=compute_75,code=sm_75 -o "$work/broken/opt/gputests/device_query" \
  "$here/programs/device_query.cu" >/dev/null 2>&1

# 3. Images made of host files: the programs, ldconfig, and every library they need.
make_recipe() {  # $1: name, $2: the tree of programs
  {
    echo "stack: $1"
    echo "layers:"
    echo "  - name: programs"
    echo "    preserve_modes: true"
    echo "    copy:"
    echo "      - {src: $2/opt/gputests/, dst: /opt/gputests/}"
    echo "      - {src: $(readlink -f /sbin/ldconfig), dst: /sbin/ldconfig}"
    for f in "$2"/opt/gputests/*; do ldd "$f"; done | awk '/=> \// {print $3} !/=>/ && $1 ~ /^\// {print $1}' |
      sort -u | while read -r lib; do
        case "$(basename "$lib")" in libcuda.so*|libnvidia-*) continue ;; esac  # the driver's: injected
        dst=$lib
        [[ "$lib" == "$cuda_root"/* ]] && dst=/usr/lib/x86_64-linux-gnu/$(basename "$lib")
        echo "      - {src: $(readlink -f "$lib"), dst: $dst}"
      done
    echo "tags: [\"$1:t\"]"
  } > "$work/$1.yaml"
  "$SB" build "$work/$1.yaml" -o "$work/layout-$1" --store "$store" --progress plain
}
if make_recipe gputests "$work/img" > "$work/build.log" 2>&1; then result "build the image" passed ""; else
  result "build the image" failed "$(cat "$work/build.log")"; summary; exit 1; fi
make_recipe broken "$work/broken" > "$work/build-broken.log" 2>&1

# 4. Static checks: the good image passes for this arch, the broken one fails.
if out=$("$SB" test "$work/layout-gputests:t" --arch "$cc" --store "$store" --progress plain 2>&1); then
  result "static checks (sm_$sm)" passed "$out"; else result "static checks (sm_$sm)" failed "$out"; fi
if out=$("$SB" test "$work/layout-broken:t" --arch "$cc" --store "$store" --progress plain 2>&1); then
  result "static checks refuse a wrong-arch image" failed "$out"
elif grep -q "no code for sm_$sm" <<<"$out"; then result "static checks refuse a wrong-arch image" passed "$out"
else result "static checks refuse a wrong-arch image" failed "$out"; fi

if [[ "$has_gpu" != 1 ]]; then
  result "GPU tests" skipped "no NVIDIA GPU on this host"
  summary
  exit 77
fi

# 5. The GPU tests: on the host (a baseline), then inside the image, driver injected.
for p in device_query gemm conv allreduce; do
  host_out=$("$work/img/opt/gputests/$p" 2>&1); host_rc=$?
  img_out=$("$SB" run "$work/layout-gputests:t" --gpus all --store "$store" --progress plain --timeout 300 \
    -- "/opt/gputests/$p" 2>&1); img_rc=$?
  [[ $host_rc -eq 0 ]] && result "$p on the host" passed "$host_out" || result "$p on the host" failed "$host_out"
  [[ $img_rc -eq 0 ]] && result "$p in the image" passed "$img_out" || result "$p in the image" failed "$img_out"
done
# 6. The broken image must fail at run time too, with a clear message.
out=$("$SB" run "$work/layout-broken:t" --gpus all --store "$store" --progress plain --timeout 120 \
  -- /opt/gputests/device_query 2>&1) && result "wrong-arch image fails on the GPU" failed "$out" ||
  result "wrong-arch image fails on the GPU" passed "$out"

summary
grep -q '"outcome": "failed"' <<<"$(summary)" && exit 1
exit 0
