#!/usr/bin/env bash
# The arch check and the recipe's static_checks, on images of libraries built
# here with nvcc: one whose .nv_fatbin holds sm_75 only but which carries an
# sm_80 fat binary in its .rodata (as cuFFT keeps most of its kernels) passes
# for 8.0; one with sm_75 only fails for 8.0, naming itself, and passes when
# the recipe's static_checks.arch_ignore names it, the gap still listed as
# ignored; the image records the exemption, so testing the layout alone
# applies it. static_checks.libraries_ignore likewise for a missing libstdc++.
source "$(dirname "$0")/lib.sh"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$NVCC" ]] || skip "no nvcc (the CUDA toolkit) on this machine"
require_tool ldd

cd "$TMP"
cat > k.cu <<'CU'
__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" void launch(float* x) { scale<<<1, 16>>>(x); }
CU
# A fat binary for sm_80, embedded as data: the library would load it itself.
"$NVCC" -fatbin -gencode arch=compute_80,code=sm_80 -o k80.fatbin k.cu || fail "nvcc -fatbin failed"
python3 - <<'PY' || fail "could not write embed.c"
data = open("k80.fatbin", "rb").read()
assert data[:4] == bytes.fromhex("50ed55ba"), "nvcc's fat binary does not start with the magic"
body = ",".join(str(b) for b in data)
open("embed.c", "w").write(
    "__attribute__((aligned(8))) const unsigned char kernels_sm80[] = {" + body + "};\n"
    "const unsigned char* kernels(void) { return kernels_sm80; }\n")
PY
so() { "$NVCC" -shared -Xcompiler -fPIC -gencode arch=compute_75,code=sm_75 -o "$@" || fail "nvcc could not build $1"; }
so libembed.so k.cu embed.c
so libold.so k.cu
readelf -SW libembed.so | grep -q ' .nv_fatbin ' || fail "libembed.so has no .nv_fatbin section"

# recipe NAME LIBS EXTRA: an image of the libraries LIBS and what they need
# (ldd; LEAVE_OUT names one to leave out), EXTRA appended to the recipe.
recipe() {
  {
    echo "stack: $1"
    echo "layers:"
    echo "  - name: app"
    echo "    copy:"
    for lib in $2; do
      echo "      - {src: $TMP/$lib, dst: /usr/local/lib/$lib}"
    done
    for lib in $2; do ldd "$TMP/$lib"; done |
      awk '/=>/ {print $1, $3} !/=>/ && $1 ~ /^\// {print $1, $1}' | sort -u |
      while read -r name path; do
        [[ -n "${LEAVE_OUT:-}" && "$name" == "$LEAVE_OUT" ]] && continue
        real=$(readlink -f "$path")
        echo "      - {src: $real, dst: $path}"
        [[ "$real" != "$path" ]] && echo "      - {src: $real, dst: $real}"
      done
    echo "tags: [\"$1:$1\"]"
    printf '%b' "${3:-}"
  } > "$1.yaml"
  sb build "$1.yaml" -o "$TMP/layout" --store "$STORE" --allow-host-paths >build.log 2>&1 || fail "build of $1 failed: $(cat build.log)"
}
recipe embed "libembed.so"
recipe gap "libembed.so libold.so"
recipe gapok "libembed.so libold.so" 'static_checks:\n  arch_ignore: ["/usr/local/lib/libold.*", "/opt/none/*.so"]\n'
LEAVE_OUT=libstdc++.so.6 recipe nolibstdcxx "libold.so" 'static_checks: {libraries_ignore: ["/usr/local/lib/lib*.so"]}\n'

check "a library with sm_80 only in a fat binary embedded in .rodata passes for 8.0"
out=$(sb test "$TMP/layout:embed" --arch 8.0 --gpus none --store "$STORE") || fail "the embedded sm_80 code was missed: $out"
grep -Eq "^passed +static: CUDA code for every requested arch +1 CUDA binary carries code" <<<"$out" ||
  fail "arch check did not pass: $out"
if out=$(sb test "$TMP/layout:embed" --arch 8.0,9.0 --gpus none --store "$STORE"); then fail "sm_90 passed: $out"; fi
grep -q "/usr/local/lib/libembed.so: no code for sm_90 (has sm_75 sm_80)" <<<"$out" ||
  fail "the union of .nv_fatbin and the embedded code is not what is reported: $out"

check "a library with sm_75 only fails for 8.0, naming itself and not the other"
if out=$(sb test "$TMP/layout:gap" --arch 8.0 --gpus none --store "$STORE"); then fail "sm_75-only passed: $out"; fi
grep -q "/usr/local/lib/libold.so: no code for sm_80 (has sm_75)" <<<"$out" || fail "unclear arch failure: $out"
grep -q "libembed.so: no code" <<<"$out" && fail "libembed.so reported: $out"

check "the same image with the library in static_checks.arch_ignore passes, the gap listed as ignored"
out=$(sb test "$TMP/layout:gapok" --arch 8.0 --gpus none --store "$STORE" --report gapok.json) ||
  fail "an ignored gap failed the image: $out"
grep -Eq "^passed +static: CUDA code for every requested arch +2 CUDA binaries carry code for every requested arch, but for 1 gap ignored in 1 file \(static_checks.arch_ignore\)" <<<"$out" ||
  fail "the message does not count the ignored gap: $out"
python3 - <<'PY' || fail "the JSON report does not list the ignored gap"
import json
r = json.load(open("gapok.json"))
arch = [t for t in r["results"] if t["name"] == "static: CUDA code for every requested arch"][0]
assert arch["outcome"] == "passed", arch
assert arch["details"] == [
    "ignored (static_checks.arch_ignore /usr/local/lib/libold.*): /usr/local/lib/libold.so: no code for sm_80 (has sm_75)",
    "unused: static_checks.arch_ignore /opt/none/*.so matches no file with a finding",
], arch["details"]
PY
check "the exemption is the image's: its tests label records it"
python3 - "$TMP/layout" <<'PY' || fail "the dev.stackbuild.tests label does not record static_checks"
import json, os, sys
layout = sys.argv[1]
blob = lambda d: json.load(open(os.path.join(layout, "blobs", *d.split(":"))))
for m in json.load(open(os.path.join(layout, "index.json")))["manifests"]:
    if m["annotations"]["org.opencontainers.image.ref.name"] != "gapok":
        continue
    label = blob(blob(m["digest"])["config"]["digest"])["config"]["Labels"]["dev.stackbuild.tests"]
    assert json.loads(label)["static_checks"] == {"arch_ignore": ["/usr/local/lib/libold.*", "/opt/none/*.so"]}, label
    break
else:
    raise SystemExit("no image gapok in the layout")
PY

check "static_checks.libraries_ignore lets a missing library through, listed as ignored"
out=$(sb test "$TMP/layout:nolibstdcxx" --gpus none --store "$STORE") || fail "an ignored missing library failed the image: $out"
grep -Eq "^passed +static: libraries resolve +[0-9]+ dynamic ELF files checked, but for 1 unresolved library ignored in 1 file \(static_checks.libraries_ignore\)" <<<"$out" ||
  fail "the message does not count the ignored libraries: $out"
grep -q "ignored (static_checks.libraries_ignore /usr/local/lib/lib\*.so): /usr/local/lib/libold.so: needs libstdc++.so.6, which is not in the image" <<<"$out" ||
  fail "the ignored library is not listed: $out"
pass
