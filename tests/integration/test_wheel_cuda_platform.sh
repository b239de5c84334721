#!/usr/bin/env bash
# A `from: wheel` component the catalog records as built with CUDA, whose index carries
# for aarch64 only a build without it (issue 36): torch's wheels on the Python index before
# 2.11 mark their nvidia-* requirements for x86_64, so for linux/arm64 they resolve to a
# CPU build. `lock` refuses that point, naming the component, the wheel and the target,
# and writes nothing; the amd64 point alone locks; a release whose aarch64 wheel needs
# NVIDIA's CUDA runtime locks for both platforms, the runtime pinned for each.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

www="$TMP/www"
python3 - "$www" <<'PY'
import hashlib, os, sys, zipfile
out, links = sys.argv[1], {}
def wheel(name, version, tag, requires=()):
    dist = name.replace("-", "_")
    fn = f"{dist}-{version}-{tag}.whl"
    os.makedirs(f"{out}/files", exist_ok=True)
    with zipfile.ZipFile(f"{out}/files/{fn}", "w") as z:
        di = f"{dist}-{version}.dist-info"
        z.writestr(f"{dist}/__init__.py", "")
        z.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" +
                   "".join(f"Requires-Dist: {r}\n" for r in requires))
        z.writestr(f"{di}/WHEEL", f"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\nTag: {tag}\n")
        z.writestr(f"{di}/RECORD", "")
    h = hashlib.sha256(open(f"{out}/files/{fn}", "rb").read()).hexdigest()
    links.setdefault(name, []).append(f'<a href="../../files/{fn}#sha256={h}">{fn}</a><br/>')
for m in ("x86_64", "aarch64"):
    wheel("nvidia-cuda-runtime", "13.0.96", f"py3-none-manylinux_2_17_{m}")
    # 2.0: CUDA for x86_64 only, as torch's wheels before 2.11
    wheel("torchy", "2.0", f"cp311-cp311-manylinux_2_28_{m}",
          ['nvidia-cuda-runtime==13.0.96; platform_system == "Linux" and platform_machine == "x86_64"'])
    # 3.0: CUDA on every Linux machine
    wheel("torchy", "3.0", f"cp311-cp311-manylinux_2_28_{m}", ['nvidia-cuda-runtime==13.0.96; platform_system == "Linux"'])
    # an NVIDIA library wheel is CUDA itself, and needs no runtime wheel (cuDNN's needs only cuBLAS's)
    wheel("nvidia-dnn-cu13", "1.0", f"py3-none-manylinux_2_17_{m}")
for name, ls in links.items():
    os.makedirs(f"{out}/simple/{name}", exist_ok=True)
    open(f"{out}/simple/{name}/index.html", "w").write("".join(ls))
PY
serve_dir "$www"
export PIP_INDEX_URL="$SERVED_URL/simple" PIP_CONFIG_FILE=/dev/null

R="$TMP/r"
mkdir -p "$R/layers"
cat >"$R/layers/cuda.yaml" <<'YAML'
component: cuda
versions:
  - {version: "13.0"}
YAML
cat >"$R/layers/torchy.yaml" <<'YAML'
component: torchy
versions:
  - {version: "2.0", requires: {cuda: "13.0"}, sources: {pip: ["torchy==2.0"]}}
  - {version: "3.0", requires: {cuda: "13.0"}, sources: {pip: ["torchy==3.0"]}}
YAML
cat >"$R/layers/dnn.yaml" <<'YAML'
component: dnn
versions:
  - {version: "1.0", requires: {cuda: "13.0"}, sources: {pip: ["nvidia-dnn-cu13==1.0"]}}
YAML
cat >"$R/w.yaml" <<'YAML'
stack: w
source_date_epoch: 1700000000
platform: {python: "3.11", glibc: "2.36"}
matrix:
  torchy: ["2.0"]
  platform: [linux/amd64, linux/arm64]
layers:
  - {name: torchy, use: torchy, version: "${torchy}", from: wheel}
tags: ["w:${torchy}"]
YAML

check "torchy 2.0 for linux/arm64: lock refuses the CPU build, naming the wheel and the target; nothing written"
expect_rc 1 lock1 sb lock "$R/w.yaml" --store "$STORE"
grep -q "layer 'torchy': the Python index's torchy 2.0 for CPython 3.11, manylinux glibc 2.36, aarch64 is a build without CUDA (torchy-2.0-cp311-cp311-manylinux_2_28_aarch64.whl): no NVIDIA CUDA runtime wheel" "$TMP/lock1.err" &&
  grep -q "while locking what the layers of point torchy=2.0 platform=linux/arm64 fetch" "$TMP/lock1.err" ||
  { show_output lock1; fail "the CPU-only aarch64 wheel is not explained"; }
[[ ! -e "$R/w.yaml.lock" ]] || fail "a failed lock wrote a lockfile"

check "the amd64 point alone locks, with the runtime"
expect_ok lock2 sb lock "$R/w.yaml" --set platform=linux/amd64 --store "$STORE"
grep -q "nvidia_cuda_runtime-13.0.96-py3-none-manylinux_2_17_x86_64.whl" "$R/w.yaml.lock" || fail "no runtime in the amd64 lock"
rm -f "$R/w.yaml.lock"

check "torchy 3.0 needs the runtime on every machine: both platforms lock"
expect_ok lock3 sb lock "$R/w.yaml" --set torchy=3.0 --store "$STORE"
for m in x86_64 aarch64; do
  grep -q "nvidia_cuda_runtime-13.0.96-py3-none-manylinux_2_17_$m.whl" "$R/w.yaml.lock" || fail "no $m runtime in the lock"
  grep -q "torchy-3.0-cp311-cp311-manylinux_2_28_$m.whl" "$R/w.yaml.lock" || fail "no $m torchy in the lock"
done

check "a layer of an NVIDIA library wheel alone (cuDNN's, beside a CUDA from elsewhere) locks without a runtime wheel"
sed 's/^layers:$/layers:\n  - {name: dnn, use: dnn, from: wheel}/' "$R/w.yaml" >"$R/d.yaml"
expect_ok lock4 sb lock "$R/d.yaml" --set torchy=3.0 --store "$STORE"
grep -q "nvidia_dnn_cu13-1.0-py3-none-manylinux_2_17_aarch64.whl" "$R/d.yaml.lock" || fail "no dnn wheel in the lock"
pass
