#!/usr/bin/env bash
# The GPU check: builds a small image from what is on this host and runs the
# GPU tests inside it, on the GPU, through stackbuild's sandbox with the
# driver injected. Needs no network: the programs compile with this host's
# CUDA toolkit, the image is made of this host's files, and stackbuild comes
# from build/gpu-bundle.tar.gz or build/gpu-bundle (tests/gpu/bundle.sh), or
# build/stackbuild. cuBLAS,
# cuDNN and NCCL are taken from the toolkit, else the system, else NVIDIA's
# wheels in this host's python3 (a GPU host's image may have them only there).
# It also runs stackbuild's own built-in tests: an image of this host's CUDA
# toolkit (headers, libcudart and, as far as the toolkit has them, cuBLAS,
# cuDNN and NCCL) records them in its dev.stackbuild.tests label, and
# `stackbuild test --compile-builtins --gpus all` compiles each built-in program
# against that image with this host's nvcc and, on a GPU, runs it; every result
# of that report is in the summary ("stackbuild test ..."). A built-in GPU test
# that passes without a GPU, or is skipped with one, counts as failed.
# Then the CUDA operators of recipes/torch-cuda-ops.yaml: Debian's pytorch
# source from the files tests/gpu/bundle.sh carries (build/gpu-ops), compiled
# against this host's torch, the recipe's GPU test run (tests/gpu/torch_ops.sh;
# step 10). Last, the same built-in tests for PyTorch and JAX on an image of
# this host's python3 environment (tests/gpu/python_image.py; step 9).
# Prints a JSON summary last (and with $OUT set, writes it and the logs there:
# see finish); exits 0 when every test passed, 1 when one
# failed, else 77 when this host has no NVIDIA GPU (the GPU tests are then
# skipped, not passed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d /tmp/sb-gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
# stackbuild from the bundle (its libraries for stackbuild alone, see below,
# not for ldd, nvcc or python3): unpacked from build/gpu-bundle.tar.gz, the
# form the device tool carries within its size limit, else as a directory.
# SB=PATH, where set, wins over the bundle (the default test run's
# test_gpu_check gives the binary it built).
bundle=""
if [[ -n "${SB:-}" ]]; then
  :
elif [[ -s "$repo/build/gpu-bundle.tar.gz" && ! -x "$repo/build/gpu-bundle/bin/stackbuild" ]]; then
  tar -xzf "$repo/build/gpu-bundle.tar.gz" -C "$work" && bundle="$work/gpu-bundle"
elif [[ -x "$repo/build/gpu-bundle/bin/stackbuild" ]]; then
  bundle="$repo/build/gpu-bundle"
fi
[[ -n "$bundle" ]] || SB="${SB:-$repo/build/stackbuild}"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# The toolkit's libraries (cuBLAS, cuDNN, NCCL) may sit outside the linker's
# default path; the programs find them there on the host, and in the image
# they go to /usr/lib/x86_64-linux-gnu.
# nvcc names its own toolkit directory (TOP): a wrapper on PATH such as
# /usr/local/bin/nvcc does not sit in it.
cuda_top=$("$NVCC" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
cuda_root=$(cd "${cuda_top:-$(dirname "$NVCC")/..}" && pwd -P)
cuda_libs=$(find "$cuda_root"/lib64 "$cuda_root"/lib "$cuda_root"/targets/*/lib -maxdepth 0 -type d 2>/dev/null | paste -sd:)
# A host may have cuDNN, NCCL or cuBLAS only as NVIDIA's wheels in its Python
# (nvidia-cudnn-cu13 and the like, under site-packages/nvidia/): their lib and
# include directories are searched after the toolkit's and the system's.
wheel_roots=$(python3 -c 'import os, site; print("\n".join(p for p in dict.fromkeys(site.getsitepackages() + [site.getusersitepackages()]) if os.path.isdir(os.path.join(p, "nvidia"))))' 2>/dev/null |
  sed '/^$/d; s|$|/nvidia|')  # none: no line, not "/nvidia"
wheel_libs=$(for r in $wheel_roots; do find "$r" -maxdepth 3 -type d -name lib; done | paste -sd:)
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cuda_libs${wheel_libs:+:$wheel_libs}"
# Where a library found on this host goes in an image: the system's stay where
# they are, the toolkit's and the wheels' go to $1 (a directory on the
# image's library path).
image_path() {  # $1: the directory, $2: the host path
  case "$2" in
    "$cuda_root"/*) echo "$1/$(basename "$2")" ;;
    /lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) echo "$2" ;;
    *) echo "$1/$(basename "$2")" ;;
  esac
}
if [[ -n "$bundle" ]]; then
  SB="$work/stackbuild"
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/bin/stackbuild" "$@"\n' \
    "$bundle" "$bundle" > "$SB"
  chmod +x "$SB"
fi
store="$work/store"
[[ "${SB_GPU_BUDGET:-540}" =~ ^[0-9]+$ ]] || { echo "SB_GPU_BUDGET='$SB_GPU_BUDGET': whole seconds, please" >&2; exit 2; }
# glibc's ldconfig for the images: Ubuntu's /sbin/ldconfig is a shell script
# around ldconfig.real, and the images have no shell.
ldconfig_bin=$(readlink -f /sbin/ldconfig)
[[ -e /sbin/ldconfig.real ]] && ldconfig_bin=$(readlink -f /sbin/ldconfig.real)
declare -a results=()
result() { results+=("{\"name\": \"$1\", \"outcome\": \"$2\", \"detail\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1][-2000:]))' "$3")}"); echo "$2: $1"; }
summary() {
  local IFS=,
  echo "{\"host\": \"$(uname -n)\", \"results\": [${results[*]}]}"
}
# finish RC: prints the summary and exits RC, or 1 when a result failed. With
# $OUT set (the device tool's folder of files that come back), it also writes
# gpu-summary.json there and gpu-logs.tar.gz of every log, report and recipe:
# the output that comes back is only its tail.
finish() {
  local s rc=$1
  s=$(summary)
  echo "$s"
  grep -q '"outcome": "failed"' <<<"$s" && rc=1
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
    echo "$s" >"$OUT/gpu-summary.json"
    (cd "$work" && tar -czf "$OUT/gpu-logs.tar.gz" --ignore-failed-read $(ls *.log *.json *.yaml 2>/dev/null)) || true
    echo "gpu check: gpu-summary.json and gpu-logs.tar.gz written to $OUT"
  fi
  exit "$rc"
}
[[ -x "$SB" ]] || { echo "no stackbuild at $SB (build it, or run tests/gpu/bundle.sh where it was built)"; exit 1; }
echo "gpu check: stackbuild from ${bundle:-$SB}"
[[ -x "$NVCC" ]] || { echo "no nvcc on this host"; exit 1; }

# 1. The host: driver, GPUs, what would be injected.
"$SB" gpu --json > "$work/gpu.json" 2>&1
cat "$work/gpu.json"
has_gpu=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(1 if d.get("gpus") else 0)' "$work/gpu.json" 2>/dev/null || echo 0)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
# stackbuild must see the GPUs nvidia-smi sees: were discovery to miss them
# here, every GPU test would be skipped and the run would read as "no GPU".
smi_count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${smi_count:-0} -gt 0 ]]; then
  sb_count=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1])).get("gpus", [])))' "$work/gpu.json" 2>/dev/null || echo 0)
  if [[ "$sb_count" == "$smi_count" ]]; then
    result "stackbuild gpu finds the GPUs nvidia-smi lists" passed "$smi_count"
  else
    result "stackbuild gpu finds the GPUs nvidia-smi lists" failed \
      "nvidia-smi -L lists $smi_count, stackbuild gpu found $sb_count: $(head -c 2000 "$work/gpu.json")"
    [[ "$has_gpu" == 1 ]] || finish 1
  fi
  # What the driver check compares an image's NVIDIA_REQUIRE_CUDA with: the
  # CUDA version libcuda reports, each GPU's brand and arch from NVML.
  smi_cuda=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | head -1 | grep -o '[0-9.]*$')
  sb_facts=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); g=(d.get("gpus") or [{}])[0]
print(d.get("cuda_version",""), g.get("arch",""), g.get("brand","") or "-")' "$work/gpu.json" 2>/dev/null)
  if [[ "$sb_facts" == "$smi_cuda $cc "* && "$sb_facts" != *" -" ]]; then
    result "stackbuild gpu reads the CUDA version, arch and brand nvidia-smi shows" passed "$sb_facts"
  else
    result "stackbuild gpu reads the CUDA version, arch and brand nvidia-smi shows" failed \
      "stackbuild: '$sb_facts' (CUDA, arch, brand); nvidia-smi: CUDA $smi_cuda, compute_cap $cc"
  fi
fi
cc=${cc:-9.0}
sm=${cc/./}

find_lib() {  # $1: name -> the soname file (libX.so.N) in the toolkit's, the system's or the wheels' dirs
  local d f
  for d in ${cuda_libs//:/ } /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/local/lib ${wheel_libs//:/ }; do
    f=$(ls "$d/lib$1.so".[0-9]* 2>/dev/null | grep -E '\.so\.[0-9]+$' | head -1)
    [[ -n "$f" ]] && { echo "$f"; return 0; }
  done
  return 1
}
find_header() {  # $1: name -> the directory holding it
  local d
  for d in "$cuda_root/include" "$cuda_root"/targets/*/include /usr/include /usr/include/x86_64-linux-gnu \
      /usr/include/aarch64-linux-gnu /usr/local/include $(for r in $wheel_roots; do find "$r" -maxdepth 3 -type d -name include; done); do
    [[ -e "$d/$1" ]] && { echo "$d"; return 0; }
  done
  return 1
}

# 2. The test programs, for this GPU's arch (SASS) and as PTX; and a broken
#    build with SASS for another arch only.
mkdir -p "$work/img/opt/gputests" "$work/broken/opt/gputests"
# Each library through a link libX.so to the file found (a wheel has only
# libX.so.N), its headers' directory with -I.
mkdir -p "$work/links"
for p in device_query gemm conv allreduce; do
  case $p in gemm) need="cublas:cublas_v2.h" ;; conv) need="cudnn:cudnn.h" ;; allreduce) need="nccl:nccl.h" ;; *) need= ;; esac
  flags=() missing=""
  for n in $need; do
    if f=$(find_lib "${n%%:*}"); then
      ln -sf "$f" "$work/links/lib${n%%:*}.so"
      flags+=("-L$work/links" "-l${n%%:*}")
    else
      missing="lib${n%%:*}.so.N"
    fi
    if h=$(find_header "${n#*:}"); then flags+=("-I$h"); else missing="${missing:+$missing, }${n#*:}"; fi
  done
  if [[ -n "$missing" ]]; then
    result "compile $p for sm_$sm" failed "this host has no $missing (toolkit, system or Python wheel directories)"
    continue
  fi
  if "$NVCC" -O2 -gencode "arch=compute_$sm,code=[sm_$sm,compute_$sm]" -o "$work/img/opt/gputests/$p" \
      "$here/programs/$p.cu" "${flags[@]}" >"$work/nvcc.log" 2>&1; then
    result "compile $p for sm_$sm" passed ""
  else
    result "compile $p for sm_$sm" failed "$(cat "$work/nvcc.log")"
  fi
done
"$NVCC" -O2 -gencode arch=compute_75,code=sm_75 -o "$work/broken/opt/gputests/device_query" \
  "$here/programs/device_query.cu" >/dev/null 2>&1

# 3. Images made of host files: the programs, ldconfig, and every library they
#    need, laid out as Debian 12 and Ubuntu 24.04 are (merged /usr: /lib, /lib64,
#    /bin and /sbin links into /usr; /etc/debian_version), so the GPU tests inject
#    the driver through those links: discovery's firmware under /lib/firmware,
#    a CDI spec's /lib/x86_64-linux-gnu. (The built-in tests' image below is
#    neither merged nor Debian's and has no ldconfig: the other placement.)
mkdir -p "$work/merged/etc"
for d in bin sbin lib lib64; do ln -s "usr/$d" "$work/merged/$d"; done
echo "12 (the GPU check's image)" >"$work/merged/etc/debian_version"
merged_path() {  # $1: an image path -> where it is in a merged-/usr image
  case "$1" in
    /lib/*|/lib64/*|/bin/*|/sbin/*) echo "/usr$1" ;;
    *) echo "$1" ;;
  esac
}
# The driver's libcuda on this host: it loads inside the images, so they get
# what it needs (libdl.so.2 and the like), as any distribution's image has.
driver_libcuda=$(python3 -c 'import json,sys
for m in json.load(open(sys.argv[1])).get("mounts", []):
    if m["container"].rsplit("/", 1)[-1].startswith("libcuda.so."): print(m["host"]); break' "$work/gpu.json" 2>/dev/null)
make_recipe() {  # $1: name, $2: the tree of programs, $3: a regex of library names to leave out,
                 # $4: "no-driver-deps" for none of what libcuda needs
  {
    echo "stack: $1"
    echo "layers:"
    echo "  - name: programs"
    echo "    preserve_modes: true"
    echo "    copy:"
    echo "      - {src: $work/merged/, dst: /}"
    echo "      - {src: $2/opt/gputests/, dst: /opt/gputests/}"
    echo "      - {src: $ldconfig_bin, dst: /usr/sbin/ldconfig}"
    { for f in "$2"/opt/gputests/*; do ldd "$f"; done
      [[ -n "$driver_libcuda" && "${4:-}" != no-driver-deps ]] && ldd "$driver_libcuda"
      # cuDNN loads its sub-libraries (graph, ops, engines) at run time: them too, and what they need.
      for f in $(for p in "$2"/opt/gputests/*; do ldd "$p"; done | awk '$1 ~ /^libcudnn\.so/ {print $3}' | sort -u); do
        for l in "$(dirname "$f")"/libcudnn_*.so.[0-9]*; do
          [[ "$l" =~ \.so\.[0-9]+$ ]] && { echo "$l => $l (0)"; ldd "$l"; }
        done
      done; } | awk '/=> \// {print $3} !/=>/ && $1 ~ /^\// {print $1}' |
      sort -u | while read -r lib; do
        case "$(basename "$lib")" in libcuda.so*|libnvidia-*) continue ;; esac  # the driver's: injected
        [[ -n "${3:-}" && "$(basename "$lib")" =~ $3 ]] && continue
        echo "      - {src: $(readlink -f "$lib"), dst: $(merged_path "$(image_path /usr/lib/x86_64-linux-gnu "$lib")")}"
      done
    echo "tags: [\"$1:t\"]"
  } > "$work/$1.yaml"
  "$SB" build "$work/$1.yaml" -o "$work/layout-$1" --store "$store" --progress plain --allow-host-paths
}
if make_recipe gputests "$work/img" > "$work/build.log" 2>&1; then result "build the image" passed ""; else
  result "build the image" failed "$(cat "$work/build.log")"; finish 1; fi
make_recipe broken "$work/broken" > "$work/build-broken.log" 2>&1
# And the good programs without cuBLAS (a library missing), and the device
# query alone without what the driver's libcuda needs (the others' libraries
# would bring it).
make_recipe nolib "$work/img" '^libcublas' > "$work/build-nolib.log" 2>&1
mkdir -p "$work/dq/opt/gputests" && cp "$work/img/opt/gputests/device_query" "$work/dq/opt/gputests/"
make_recipe nodeps "$work/dq" "" no-driver-deps > "$work/build-nodeps.log" 2>&1

# 4. Static checks: the good image passes for this arch, the broken one fails.
if out=$("$SB" test "$work/layout-gputests:t" --arch "$cc" --store "$store" --progress plain 2>&1); then
  result "static checks (sm_$sm)" passed "$out"; else result "static checks (sm_$sm)" failed "$out"; fi
if out=$("$SB" test "$work/layout-broken:t" --arch "$cc" --store "$store" --progress plain 2>&1); then
  result "static checks refuse a wrong-arch image" failed "$out"
elif grep -q "no code for sm_$sm" <<<"$out"; then result "static checks refuse a wrong-arch image" passed "$out"
else result "static checks refuse a wrong-arch image" failed "$out"; fi
if out=$("$SB" test "$work/layout-nolib:t" --arch "$cc" --store "$store" --progress plain 2>&1); then
  result "static checks refuse an image missing cuBLAS" failed "$out"
elif grep -q "gemm: needs libcublas.so.[0-9]*, which is not in the image" <<<"$out"; then
  result "static checks refuse an image missing cuBLAS" passed "$out"
else result "static checks refuse an image missing cuBLAS" failed "$out"; fi

# report_rows REPORT LABEL COMPONENT...: every result of a `stackbuild test
# --report` as it is (named "stackbuild test" LABEL, then the test's name),
# except that a built-in GPU test that passed without a GPU, was skipped with
# one, or is missing for a COMPONENT the image records, fails.
report_rows() {
  local line
  while IFS= read -r line; do results+=("$line"); done < <(python3 - "$1" "$has_gpu" "$2" "${@:3}" <<'PY'
import json, sys
rep, has_gpu, label, want = json.load(open(sys.argv[1])), sys.argv[2] == "1", sys.argv[3], sys.argv[4:]
label = "stackbuild test" + label
rows, names = [], {t["name"] for t in rep["results"]}
for t in rep["results"]:
    outcome, detail = t["outcome"], t.get("message", "")
    if t.get("details"):
        detail += "\n" + "\n".join(t["details"])
    # A built-in test runs on the GPU but for compiling its program and a
    # framework's import (which checks the versions it loaded, on any host).
    gpu_test = t["kind"] == "gpu" or (t["kind"] == "builtin" and not t["name"].startswith("builtin: compile ")
                                      and not t["name"].endswith(" import"))
    if gpu_test and outcome == "passed" and not has_gpu:
        outcome, detail = "failed", "passed on a host without a GPU: " + detail
    if gpu_test and outcome == "skipped" and has_gpu:
        outcome, detail = "failed", "skipped on a host with a GPU: " + detail
    rows.append((label + " " + t["name"], outcome, detail))
# The report names the GPUs its GPU tests ran on (notes shows it), and none without one.
gpus = rep.get("gpus", "")
if has_gpu and "driver" not in gpus:
    rows.append((label + ": the report names the GPUs", "failed", "gpus is '" + gpus + "'"))
elif has_gpu:
    rows.append((label + ": the report names the GPUs", "passed", gpus))
elif gpus:
    rows.append((label + ": the report names no GPU without one", "failed", "gpus is '" + gpus + "'"))
frameworks = ("pytorch", "jax", "tensorflow")
for c in want:
    for n in ("builtin: " + c + " import", "builtin: " + c) if c in frameworks else ("builtin: compile " + c, "builtin: " + c):
        if n not in names:
            rows.append((label + " " + n, "failed", "not in the report, though the image records " + c))
for name, outcome, detail in rows:
    if len(detail) > 2000:  # the message and the first and last details
        detail = detail[:1000] + "\n...\n" + detail[-1000:]
    print(json.dumps({"name": name, "outcome": outcome, "detail": detail}))
    print(outcome + ": " + name, file=sys.stderr)
PY
)
}

# 5. stackbuild's built-in tests, on an image of the host toolkit: its include
#    directory (plus cuDNN's and NCCL's headers where they sit elsewhere) and,
#    in /usr/local/cuda/lib64, libcudart and the libraries of each component
#    the toolkit has (all of cuDNN's: it loads its engines at run time), with
#    what they and a host-compiled program need.
builtins=() libs=() headers=()
for comp in cuda cublas cudnn nccl; do
  case $comp in
    cuda) h=cuda_runtime.h names="cudart" ;;
    cublas) h=cublas_v2.h names="cublas cublasLt" ;;
    cudnn) h=cudnn.h names="cudnn" ;;
    nccl) h=nccl.h names="nccl" ;;
  esac
  missing=""
  hdir=$(find_header "$h") || missing="$h"
  found=()
  for n in $names; do
    if f=$(find_lib "$n"); then found+=("$f"); else missing="${missing:+$missing, }lib$n.so.N"; fi
  done
  if [[ -n "$missing" ]]; then
    if [[ $comp == cuda ]]; then result "built-in tests: the image" failed "the host toolkit has no $missing"; break; fi
    result "built-in test $comp" skipped "the host toolkit has no $missing"
    continue
  fi
  builtins+=("$comp")
  libs+=("${found[@]}")
  if [[ $comp == cudnn ]]; then
    for f in "$(dirname "${found[0]}")"/libcudnn_*.so.[0-9]*; do [[ "$f" =~ \.so\.[0-9]+$ ]] && libs+=("$f"); done
  fi
  if [[ "$hdir" != "$cuda_root/include" ]]; then
    if [[ $comp == cudnn ]]; then headers+=("$hdir"/cudnn*.h); else headers+=("$hdir/$h"); fi
  fi
done
if [[ " ${builtins[*]} " == *" cuda "* ]]; then
  # The toolkit's headers with their links followed: a toolkit assembled from
  # NVIDIA's wheels (as this machine's images may be) links its include
  # directory's files to site-packages, and a copy layer keeps links as links.
  cp -rL "$cuda_root/include" "$work/cuda-include" 2>"$work/cp-include.log" || true
  {
    echo "stack: builtins"
    echo "layers:"
    echo "  - name: cuda"
    echo "    copy:"
    echo "      - {src: $work/cuda-include/, dst: /usr/local/cuda/include/}"
    for h in "${headers[@]}"; do echo "      - {src: $(readlink -f "$h"), dst: /usr/local/cuda/include/$(basename "$h")}"; done
    for l in "${libs[@]}"; do echo "      - {src: $(readlink -f "$l"), dst: /usr/local/cuda/lib64/$(basename "$l")}"; done
    # What they need (the toolkit's own into lib64 too), and what a program
    # the host nvcc compiles needs (libstdc++ and the like).
    for f in "${libs[@]}" "$work/img/opt/gputests/device_query"; do [[ -e "$f" ]] && ldd "$f"; done |
      awk '/=> \// {print $1, $3} !/=>/ && $1 ~ /^\// {print $1, $1}' | sort -u | while read -r name lib; do
        case "$name" in libcuda.so*|libnvidia-*) continue ;; esac
        for l in "${libs[@]}"; do [[ "$(basename "$l")" == "$name" ]] && continue 2; done
        real=$(readlink -f "$lib")
        echo "      - {src: $real, dst: $(image_path /usr/local/cuda/lib64 "$lib")}"
      done | sort -u
    echo "config:"
    echo "  env: {LD_LIBRARY_PATH: /usr/local/cuda/lib64}"
    list=$(printf '"%s", ' "${builtins[@]}")
    echo "  labels:"
    echo "    dev.stackbuild.tests: '{\"tests\": [], \"builtin\": [${list%, }]}'"
    # The release nvcc says, for the versions check against the image's headers.
    release=$("$NVCC" --version | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p' | head -1)
    [[ -n "$release" ]] && echo "    dev.stackbuild.version.cuda: \"$release\""
    echo "tags: [\"builtins:t\"]"
  } > "$work/builtins.yaml"
  if "$SB" build "$work/builtins.yaml" -o "$work/layout-builtins" --store "$store" --compression none \
      --progress plain --allow-host-paths > "$work/build-builtins.log" 2>&1; then
    result "build the built-in tests' image (${builtins[*]})" passed ""
    "$SB" test "$work/layout-builtins:t" --gpus all --compile-builtins --nvcc "$NVCC" --arch "$cc" \
      --report "$work/builtins.json" --store "$store" --progress plain > "$work/test-builtins.log" 2>&1
    rc=$?
    cat "$work/test-builtins.log"
    if [[ $rc -gt 1 || ! -s "$work/builtins.json" ]]; then
      result "stackbuild test of the built-in tests' image" failed "exit $rc: $(cat "$work/test-builtins.log")"
    else
      report_rows "$work/builtins.json" "" "${builtins[@]}"
    fi
  else
    result "build the built-in tests' image (${builtins[*]})" failed "$(cat "$work/build-builtins.log")"
  fi
fi

# 9. The frameworks' built-in tests (PyTorch, JAX: the import with the versions
#    the framework loads checked against its wheels', a matmul on the GPU
#    checked against the CPU) on an image of this host's Python environment
#    made by tests/gpu/python_image.py. Skipped when python3 has neither, or
#    with SB_GPU_FRAMEWORKS=0; run last, each command bounded by what is left
#    of SB_GPU_BUDGET seconds (default 540), so that the summary still comes
#    back within the device tool's limit.
framework_tests() {
  local rc left t0 comps
  if [[ "${SB_GPU_FRAMEWORKS:-1}" == 0 ]]; then result "framework tests" skipped "SB_GPU_FRAMEWORKS=0"; return; fi
  left=$(( ${SB_GPU_BUDGET:-540} - SECONDS ))
  if (( left < 120 )); then result "framework tests" skipped "only ${left}s left of SB_GPU_BUDGET"; return; fi
  env -u LD_LIBRARY_PATH python3 "$here/python_image.py" "$work" frameworks:t "$work/merged" \
    "$ldconfig_bin" "$cuda_root" > "$work/frameworks.yaml" 2> "$work/frameworks-recipe.log"
  rc=$?
  cat "$work/frameworks-recipe.log"
  if [[ $rc -eq 2 ]]; then result "framework tests" skipped "$(cat "$work/frameworks-recipe.log")"; return; fi
  if [[ $rc -ne 0 ]]; then result "framework image recipe" failed "$(cat "$work/frameworks-recipe.log")"; return; fi
  comps=$(python3 -c 'import json,re,sys
m = re.search(r"dev.stackbuild.tests: (.*)", open(sys.argv[1]).read())
print(" ".join(json.loads(json.loads(m.group(1)))["builtin"]))' "$work/frameworks.yaml")
  t0=$SECONDS
  if timeout $(( left - 60 )) "$SB" build "$work/frameworks.yaml" -o "$work/layout-frameworks" --store "$store" \
      --compression none --progress plain --allow-host-paths > "$work/build-frameworks.log" 2>&1; then
    result "build the frameworks' image ($comps)" passed "$((SECONDS - t0)) s; $(du -sh "$work/layout-frameworks" | cut -f1)"
  else
    result "build the frameworks' image ($comps)" failed "$(tail -c 3000 "$work/build-frameworks.log")"
    return
  fi
  left=$(( ${SB_GPU_BUDGET:-540} - SECONDS ))
  t0=$SECONDS
  timeout $(( left > 30 ? left : 30 )) "$SB" test "$work/layout-frameworks:t" --gpus all --arch "$cc" \
    --report "$work/frameworks.json" --store "$store" --progress plain > "$work/test-frameworks.log" 2>&1
  rc=$?
  cat "$work/test-frameworks.log"
  echo "gpu check: stackbuild test of the frameworks' image: exit $rc in $((SECONDS - t0)) s"
  if [[ $rc -gt 1 || ! -s "$work/frameworks.json" ]]; then
    result "stackbuild test of the frameworks' image" failed "exit $rc after $((SECONDS - t0)) s: $(tail -c 3000 "$work/test-frameworks.log")"
  else
    # shellcheck disable=SC2086 # one word per component
    report_rows "$work/frameworks.json" " (frameworks)" $comps
  fi
}

# 10. The CUDA operators of Debian's pytorch source (tests/gpu/torch_ops.sh).
# shellcheck source=torch_ops.sh
source "$here/torch_ops.sh"

if [[ "$has_gpu" != 1 ]]; then
  result "GPU tests" skipped "no NVIDIA GPU on this host"
  torch_ops_tests
  framework_tests
  finish 77
fi

# 6. The GPU tests: on the host (a baseline), then inside the image, driver injected.
for p in device_query gemm conv allreduce; do
  host_out=$("$work/img/opt/gputests/$p" 2>&1); host_rc=$?
  img_out=$("$SB" run "$work/layout-gputests:t" --gpus all --store "$store" --progress plain --timeout 300 \
    -- "/opt/gputests/$p" 2>&1); img_rc=$?
  [[ $host_rc -eq 0 ]] && result "$p on the host" passed "$host_out" || result "$p on the host" failed "$host_out"
  [[ $img_rc -eq 0 ]] && result "$p in the image" passed "$img_out" || result "$p in the image" failed "$img_out"
done
# 7. The broken image must fail at run time too, with a clear message.
#    The CUDA runtime's own words, not any failure: on the H200 a run that
#    could not start (its ldconfig missing) once passed here.
if out=$("$SB" run "$work/layout-broken:t" --gpus all --store "$store" --progress plain --timeout 120 \
    -- /opt/gputests/device_query 2>&1); then
  result "wrong-arch image fails on the GPU" failed "it ran: $out"
elif grep -q '"ok": false' <<<"$out" && grep -qiE 'no kernel image|invalid device function' <<<"$out"; then
  result "wrong-arch image fails on the GPU" passed "$out"
else
  result "wrong-arch image fails on the GPU" failed "not for its arch: $out"
fi

#    The image missing cuBLAS: the loader's own words, naming it.
if out=$("$SB" run "$work/layout-nolib:t" --gpus all --store "$store" --progress plain --timeout 120 \
    -- /opt/gputests/gemm 2>&1); then
  result "an image missing cuBLAS fails on the GPU" failed "it ran: $out"
elif grep -q "libcublas.so.[0-9]*: cannot open shared object file" <<<"$out"; then
  result "an image missing cuBLAS fails on the GPU" passed "$out"
else
  result "an image missing cuBLAS fails on the GPU" failed "not for cuBLAS: $out"
fi

#    The image without what libcuda needs: stackbuild says so before the run
#    (found on the H200, where CUDA said only "driver version is insufficient").
if [[ -n "$driver_libcuda" ]]; then
  out=$("$SB" run "$work/layout-nodeps:t" --gpus all --store "$store" --progress plain --timeout 120 \
    -- /opt/gputests/device_query 2>&1)
  if grep -q "the driver's libcuda.so.[0-9.]* needs .*, which the image lacks" <<<"$out"; then
    result "an image without what libcuda needs is warned of" passed "$out"
  elif ! grep -q '"ok": false' <<<"$out"; then
    result "an image without what libcuda needs is warned of" skipped "the image has all libcuda needs ($out)"
  else
    result "an image without what libcuda needs is warned of" failed "$out"
  fi
fi

# 8. The driver check against the real driver's answers: an NVIDIA_REQUIRE_CUDA
# above the driver's CUDA version is refused, naming the GPU; one at it runs.
if out=$("$SB" run "$work/layout-gputests:t" --gpus all --store "$store" --progress plain \
    --env 'NVIDIA_REQUIRE_CUDA=cuda>=99.0' -- true 2>&1); then
  result "NVIDIA_REQUIRE_CUDA above the driver is refused" failed "it ran: $out"
elif grep -q "does not accept GPU 0 (CUDA [0-9]" <<<"$out"; then
  result "NVIDIA_REQUIRE_CUDA above the driver is refused" passed "$(grep 'does not accept' <<<"$out")"
else
  result "NVIDIA_REQUIRE_CUDA above the driver is refused" failed "unclear: $out"
fi
host_cuda=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("cuda_version",""))' "$work/gpu.json")
out=$("$SB" run "$work/layout-gputests:t" --gpus all --store "$store" --progress plain \
  --env "NVIDIA_REQUIRE_CUDA=cuda>=${host_cuda:-0.0},arch>=${cc}" -- /opt/gputests/device_query 2>&1) &&
  result "NVIDIA_REQUIRE_CUDA at the driver's CUDA ${host_cuda:-?} runs" passed "" ||
  result "NVIDIA_REQUIRE_CUDA at the driver's CUDA ${host_cuda:-?} runs" failed "$out"

torch_ops_tests
framework_tests
finish 0
