# shellcheck shell=bash disable=SC2154  # the variables are run.sh's
# Sourced by tests/gpu/run.sh (step 10), which sets work, store, SB, NVCC,
# cuda_root, cc, sm, has_gpu, repo and result().
#
# The CUDA operators of recipes/torch-cuda-ops.yaml (issue 37's stand-in for
# torchvision's) on a GPU host, which has no network and its own PyTorch:
# 1. the image of tests/gpu/ops-source.yaml, Debian's signed pytorch source
#    package kept at /opt/pytorch, built --locked with STACKBUILD_OFFLINE=1
#    from the files tests/gpu/bundle.sh carries (build/gpu-ops): each file's
#    sha256 checked against its name here, the build finding them by the
#    lockfile's pins, the patched tree checked against its pinned digest,
#    which is torch-cuda-ops.yaml.lock's (test_locks_current);
# 2. its test/cpp_extensions compiled against this host's torch with this
#    host's nvcc, for this GPU's arch only, as the recipe's step compiles
#    them against the image's torch (CUDAExtension; here built in place);
# 3. the library holds this arch's SASS and no PTX (stackbuild cuda-code,
#    and cuobjdump where the toolkit has it);
# 4. the recipe's own tests, their commands read from the recipe: `import`
#    (the library loads against torch) and, with a GPU, `sigmoid-add`
#    (sigmoid_add on the GPU against torch on the CPU: "match").
# What this does not show: the image of recipes/torch-cuda-ops.yaml itself
# on the GPU (its PyTorch 2.6.0 and CUDA 12.4 toolkit are gigabytes, over
# what the device tool carries); the operators here are the same source,
# compiled against another torch.
torch_ops_tests() {
  local ops="$repo/build/gpu-ops" name="CUDA operators of Debian's pytorch source" left t0 dir so out cmd tv rc
  if [[ "${SB_GPU_OPS:-1}" == 0 ]]; then result "$name" skipped "SB_GPU_OPS=0"; return; fi
  if [[ ! -d "$ops/store" ]]; then result "$name" skipped "no build/gpu-ops here (tests/gpu/bundle.sh makes it)"; return; fi
  if ! tv=$(python3 -c 'import torch, torch.utils.cpp_extension; print(torch.__version__)' 2>"$work/ops-torch.log"); then
    result "$name" skipped "python3 has no PyTorch: $(tail -c 500 "$work/ops-torch.log")"
    return
  fi
  left=$(( ${SB_GPU_BUDGET:-540} - SECONDS ))
  if (( left < 180 )); then result "$name" skipped "only ${left}s left of SB_GPU_BUDGET"; return; fi

  t0=$SECONDS
  # The carried files enter the store only under their own sha256: a store
  # takes a blob's name on trust (the fetcher checked it when it stored it).
  local blob bad=""
  rm -rf "$work/ops" && cp -r "$ops" "$work/ops" && mkdir -p "$store/blobs/sha256"
  for blob in "$work/ops/store/blobs/sha256/"*; do
    [[ "$(sha256sum "$blob" | cut -d' ' -f1)" == "$(basename "$blob")" ]] || bad="$bad $(basename "$blob")"
  done
  if [[ -n "$bad" ]]; then
    result "$name: the source image from the carried files" failed "build/gpu-ops holds files whose sha256 is not their name:$bad"
    return
  fi
  cp "$work/ops/store/blobs/sha256/"* "$store/blobs/sha256/"
  if ! STACKBUILD_OFFLINE=1 timeout 300 "$SB" build "$work/ops/ops-source.yaml" --locked --store "$store" \
      -o "$work/layout-ops" --compression none --progress plain >"$work/build-ops.log" 2>&1 ||
     ! "$SB" unpack "$work/layout-ops" "$work/ops-root" --store "$store" >>"$work/build-ops.log" 2>&1; then
    result "$name: the source image from the carried files" failed "$(tail -c 3000 "$work/build-ops.log")"
    return
  fi
  result "$name: the source image from the carried files" passed \
    "$((SECONDS - t0)) s; $(grep -m1 -o 'tree sha256:[0-9a-f]*' "$work/build-ops.log")"

  dir="$work/ops-root/opt/pytorch/test/cpp_extensions"
  t0=$SECONDS
  left=$(( ${SB_GPU_BUDGET:-540} - SECONDS ))
  (cd "$dir" && CUDA_HOME="$cuda_root" TORCH_CUDA_ARCH_LIST="$cc" MAX_JOBS="$(nproc)" timeout $(( left > 120 ? left - 60 : 60 )) \
    python3 -c 'from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
setup(name="torch-cuda-ops", version="2.6.0",
      ext_modules=[CUDAExtension("torch_cuda_ops",
                                 ["cuda_extension.cpp", "cuda_extension_kernel.cu", "cuda_extension_kernel2.cu"],
                                 extra_compile_args={"cxx": ["-g0"], "nvcc": ["-O2"]})],
      cmdclass={"build_ext": BuildExtension},
      script_args=["-q", "build_ext", "--inplace"])') >"$work/compile-ops.log" 2>&1
  rc=$?
  so=$(find "$dir" -maxdepth 1 -name 'torch_cuda_ops*.so' | head -1)
  if [[ $rc -ne 0 || -z "$so" ]]; then
    result "$name: compile for sm_$sm against torch $tv" failed "exit $rc: $(tail -c 3000 "$work/compile-ops.log")"
    return
  fi
  result "$name: compile for sm_$sm against torch $tv" passed "$((SECONDS - t0)) s"

  # Only this GPU's arch, as SASS, no PTX: what TORCH_CUDA_ARCH_LIST asked.
  # stackbuild's own reading, and cuobjdump's where the toolkit has it.
  out=$("$SB" cuda-code --json "$so" 2>&1)
  if python3 -c 'import json, sys
(f,) = json.loads(sys.argv[1])
sys.exit(0 if f["sass"] == ["sm_" + sys.argv[2]] and not f["ptx"] else 1)' "$out" "$sm" 2>/dev/null; then
    result "$name: sm_$sm alone in the library" passed "$out"
  else
    result "$name: sm_$sm alone in the library" failed "$out"
  fi
  local cuobjdump
  cuobjdump=$(command -v cuobjdump || echo "$cuda_root/bin/cuobjdump")
  if [[ -x "$cuobjdump" ]]; then
    out=$("$cuobjdump" --list-elf --list-ptx "$so" 2>&1)
    if grep -q "sm_$sm" <<<"$out" && ! grep -q '\.ptx' <<<"$out" && ! grep -v "sm_$sm" <<<"$out" | grep -q 'sm_[0-9]'; then
      result "$name: cuobjdump lists sm_$sm alone" passed "$out"
    else
      result "$name: cuobjdump lists sm_$sm alone" failed "$out"
    fi
  fi

  # The recipe's import test (no GPU needed) and its GPU test, as written there.
  recipe_test import "$dir"
  if [[ "$has_gpu" != 1 ]]; then
    result "$name: the recipe's sigmoid-add test" skipped "no NVIDIA GPU on this host"
    return
  fi
  recipe_test sigmoid-add "$dir"
}

# recipe_test NAME DIR: recipes/torch-cuda-ops.yaml's test NAME, its command
# run here with DIR on PYTHONPATH; it must exit 0 with the test's `expect` in
# its output. Reports under torch_ops_tests' $name.
recipe_test() {
  local test=$1 dir=$2 spec cmd want out
  spec=$(python3 - "$repo/recipes/torch-cuda-ops.yaml" "$test" <<'PY'
import json, re, sys
text, name = open(sys.argv[1]).read(), sys.argv[2]
try:
    import yaml
    t = next(t for t in yaml.safe_load(text)["tests"] if t["name"] == name)
except ImportError:  # no PyYAML: the test's lines; its double-quoted strings read as JSON does
    block = re.search(r"- name: " + re.escape(name) + r"\b[^\n]*\n((?:\s{4,}[^\n]*\n)*)", text).group(1)
    t = {}
    for key in ("run", "expect"):
        m = re.search(r"^\s+" + key + r': ("(?:[^"\\]|\\.)*"|\S+)', block, re.M)
        t[key] = json.loads(m.group(1)) if m.group(1).startswith('"') else m.group(1)
print(json.dumps({"run": t["run"], "expect": t["expect"]}))
PY
)
  cmd=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["run"])' "$spec" 2>/dev/null)
  want=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["expect"])' "$spec" 2>/dev/null)
  if [[ -z "$cmd" || -z "$want" ]]; then
    result "$name: the recipe's $test test" failed "no test '$test' with run and expect in recipes/torch-cuda-ops.yaml"
    return
  fi
  # As stackbuild test judges it: exit 0, and the output holds `expect`.
  if out=$(cd "$dir" && PYTHONPATH="$dir" timeout 120 sh -c "$cmd" 2>&1) && [[ "$out" == *"$want"* ]]; then
    result "$name: the recipe's $test test" passed "$out"
  else
    result "$name: the recipe's $test test" failed "expected '$want' in the output: $out"
  fi
}
