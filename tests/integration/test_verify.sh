#!/usr/bin/env bash
# stackbuild test: the static checks on images built here. A CUDA program
# compiled with nvcc (sm_80 SASS and compute_90 PTX) and the libraries it
# needs, copied from the host, make a small image; checks that pass, an arch
# it lacks, a missing library, and GPU tests reported skipped (never passed);
# on a fake GPU host (test --host-root), the GPU's own arch.
source "$(dirname "$0")/lib.sh"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$NVCC" ]] || skip "no nvcc (the CUDA toolkit) on this machine"
require_tool ldd

cd "$TMP"
cat > kernel.cu <<'CU'
__global__ void add(float* x) { x[threadIdx.x] += 1.0f; }
int main() { float* d; cudaMalloc(&d, 64); add<<<1, 16>>>(d); cudaDeviceSynchronize(); return 0; }
CU
"$NVCC" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=compute_90 -o kernel kernel.cu ||
  fail "nvcc could not compile the test kernel"

# A recipe copying the program and each library ldd lists, at their real paths.
recipe() {  # $1: name, $2: a library to leave out (or "")
  {
    echo "stack: $1"
    echo "layers:"
    echo "  - name: app"
    echo "    preserve_modes: true"
    echo "    copy:"
    echo "      - {src: $TMP/kernel, dst: /usr/local/bin/kernel}"
    ldd "$TMP/kernel" | awk '/=>/ {print $1, $3} !/=>/ && $1 ~ /^\// {print $1, $1}' |
      while read -r name path; do
        [[ -n "$2" && "$name" == "$2" ]] && continue
        real=$(readlink -f "$path")
        echo "      - {src: $real, dst: $path}"
        [[ "$real" != "$path" ]] && echo "      - {src: $real, dst: $real}"
      done
    echo "tags: [\"$1:$1\"]"
  } > "$1.yaml"
  sb build "$1.yaml" -o "$TMP/layout" --store "$STORE" --allow-host-paths >/dev/null 2>&1 || fail "build of $1 failed"
}
sb() { "$SB" "$@" --progress plain; }
recipe good ""
recipe nolibc libc.so.6

check "an image with everything it needs passes for sm_80 (SASS) and sm_90 (PTX)"
out=$(sb test "$TMP/layout:good" --arch 8.0,9.0 --store "$STORE" --report report.json --junit junit.xml) ||
  fail "stackbuild test failed on a good image: $out"
grep -Eq "^passed +static: libraries resolve" <<<"$out" || fail "libraries check did not pass: $out"
grep -Eq "^passed +static: CUDA code for every requested arch" <<<"$out" || fail "arch check did not pass: $out"
grep -Eq "^skipped +gpu: driver and devices +no NVIDIA GPU on this host" <<<"$out" ||
  [[ -e /dev/nvidiactl ]] || fail "the GPU test is not reported skipped on a host without a GPU: $out"
python3 - <<'PY' || fail "the JSON or JUnit report is wrong"
import json, xml.etree.ElementTree as ET
r = json.load(open("report.json"))
assert r["summary"]["failed"] == 0, r
assert r["summary"]["passed"] >= 2, r
suite = ET.parse("junit.xml").getroot().find("testsuite")
assert int(suite.get("failures")) == 0 and int(suite.get("tests")) == len(r["results"])
PY

check "a --report or --junit into a directory that does not exist is refused before the tests run (exit 2)"
rc=0; out=$(sb test "$TMP/layout:good" --store "$STORE" --report "$TMP/no-such-dir/r.json" 2>&1) || rc=$?
[[ $rc == 2 ]] || fail "exit $rc, not 2: $out"
grep -q "^stackbuild: error: --report $TMP/no-such-dir/r.json: the directory $TMP/no-such-dir does not exist$" <<<"$out" ||
  fail "the error: $out"
! grep -q "^passed" <<<"$out" || fail "the tests ran: $out"
rc=0; out=$(sb test "$TMP/layout:good" --store "$STORE" --junit "$TMP/no-such-dir/j.xml" 2>&1) || rc=$?
[[ $rc == 2 ]] || fail "--junit: exit $rc, not 2: $out"

check "an arch the binary has no code for fails, naming the file and the arch"
if out=$(sb test "$TMP/layout:good" --arch 7.5 --store "$STORE"); then fail "sm_75 passed: $out"; fi
grep -q "/usr/local/bin/kernel: no code for sm_75 (has sm_80 compute_90)" <<<"$out" || fail "unclear arch failure: $out"

check "with a GPU (a fake host, --host-root): its own arch is checked too, where no requested one covers it"
# The driver's libcuda and NVML say the GPU is sm_75: the kernel (sm_80 SASS,
# compute_90 PTX) has no code it runs, whatever --arch asked for.
fake_driver_host "$TMP/host"
rc=0; out=$(FAKE_CC=7.5 sb test "$TMP/layout:good" --arch 8.0 --store "$STORE" --host-root "$TMP/host" 2>&1) || rc=$?
[[ $rc == 1 ]] || fail "an image without code for the GPU passed (rc $rc): $out"
grep -Eq "^passed +static: CUDA code for every requested arch" <<<"$out" || fail "the requested arch: $out"
grep -Eq "^passed +gpu: driver and devices +driver 535.104.05 \(CUDA 12.2\), 1 GPUs" <<<"$out" || fail "the driver: $out"
grep -Eq "^failed +gpu: CUDA code for sm_75 \(GPU 0\) +1 gap in 1 CUDA binary" <<<"$out" &&
  grep -qF "/usr/local/bin/kernel: no code for sm_75 (has sm_80 compute_90)" <<<"$out" ||
  fail "no clear failure for the GPU's arch: $out"
# An sm_86 GPU runs the sm_80 SASS; an sm_90 one is a requested arch, so no second check.
out=$(FAKE_CC=8.6 sb test "$TMP/layout:good" --arch 8.0 --store "$STORE" --host-root "$TMP/host" 2>&1) ||
  fail "sm_80 SASS on an sm_86 GPU: $out"
grep -Eq "^passed +gpu: CUDA code for sm_86 \(GPU 0\) +1 CUDA binary carries code for sm_86, the GPU here" <<<"$out" ||
  fail "the GPU's arch: $out"
out=$(sb test "$TMP/layout:good" --arch 8.0,9.0 --store "$STORE" --host-root "$TMP/host" 2>&1) || fail "sm_90: $out"
! grep -q "gpu: CUDA code for" <<<"$out" || fail "a second check of a requested arch: $out"

check "an image missing a library fails, naming the file and the library"
if out=$(sb test "$TMP/layout:nolibc" --store "$STORE"); then fail "an image without libc passed: $out"; fi
grep -q "/usr/local/bin/kernel: needs libc.so.6, which is not in the image" <<<"$out" || fail "unclear library failure: $out"

if [[ ! -e /dev/nvidiactl && ! -e /proc/driver/nvidia/version ]]; then
  check "without a GPU: gpu --json is still JSON (no GPUs, a warning); gpu --cdi has nothing to write (exit 1)"
  out=$("$SB" gpu --json) || fail "gpu --json failed: $out"
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); assert j["gpus"] == [] and j["source"] is None and "no NVIDIA driver" in j["warnings"][0], j' "$out" ||
    fail "gpu --json: $out"
  rc=0; out=$("$SB" gpu --cdi 2>&1) || rc=$?
  [[ $rc == 1 ]] && grep -q "no CDI spec to write" <<<"$out" || fail "gpu --cdi: exit $rc: $out"
fi
pass
