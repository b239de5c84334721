#!/usr/bin/env bash
# The redist source against a fixture mirror on 127.0.0.1 made from this
# machine's CUDA toolkit (tests/integration/redist_mirror.py): `stackbuild
# redist` unpacks cudart and nvcc into usr/local/cuda-X.Y, the nvcc there runs,
# the layer is the same twice, and a wrong sha256 fails with nothing unpacked.
source "$(dirname "$0")/lib.sh"
cuda=$(readlink -f /usr/local/cuda 2>/dev/null || true)
[[ -n "$cuda" && -x "$cuda/bin/nvcc" ]] || skip "no CUDA toolkit with nvcc at /usr/local/cuda"
xy=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
[[ -n "$xy" ]] || skip "cannot read nvcc's release"

python3 "$HERE/redist_mirror.py" "$cuda" "$TMP/mirror" "$xy.0" || fail "building the mirror"
port_file="$TMP/port"
python3 - "$TMP/mirror" "$port_file" <<'PY' &
import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
h = functools.partial(Quiet, directory=sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
server=$!
trap 'kill $server 2>/dev/null; cleanup' EXIT
for _ in $(seq 50); do [[ -s $port_file ]] && break; sleep 0.1; done
base="http://127.0.0.1:$(cat "$port_file")"

check "stackbuild redist unpacks cudart and nvcc (with its dependencies) into usr/local/cuda-$xy"
sb redist --store "$STORE" --base-url "$base" --version "$xy.0" --target "$TMP/root" nvcc >"$TMP/out" ||
  fail "stackbuild redist failed"
grep -q '^cuda_cudart ' "$TMP/out" || fail "nvcc did not bring cuda_cudart: $(cat "$TMP/out")"
[[ $(readlink "$TMP/root/usr/local/cuda") == "cuda-$xy" ]] || fail "usr/local/cuda does not point at cuda-$xy"
[[ -f "$TMP/root/usr/local/cuda-$xy/lib64/libcudart.so.${xy%%.*}" || -L "$TMP/root/usr/local/cuda-$xy/lib64/libcudart.so.${xy%%.*}" ]] ||
  fail "no lib64/libcudart.so.${xy%%.*}"
[[ -f "$TMP/root/usr/local/cuda-$xy/share/doc/cuda_nvcc/LICENSE" ]] || fail "no LICENSE under share/doc"

check "the unpacked nvcc prints release $xy"
"$TMP/root/usr/local/cuda/bin/nvcc" --version | grep -q "release $xy" || fail "nvcc --version: $("$TMP/root/usr/local/cuda/bin/nvcc" --version)"

check "the layer is the same twice"
one=$(sb redist --store "$STORE" --base-url "$base" --version "$xy.0" --layer cudart 2>&1 | sed -n 's/^digest: //p')
two=$(sb redist --store "$TMP/store2" --base-url "$base" --version "$xy.0" --layer cudart 2>&1 | sed -n 's/^digest: //p')
[[ -n $one && $one == "$two" ]] || fail "layer digests differ: $one / $two"

check "a wrong sha256 in the manifest fails and unpacks nothing"
m="$TMP/mirror/cuda/redist/redistrib_$xy.0.json"
python3 -c "import json,sys; m=json.load(open('$m')); m['cuda_cudart']['linux-x86_64']['sha256']='0'*64; json.dump(m, open('$m','w'))"
if sb redist --store "$TMP/store3" --base-url "$base" --version "$xy.0" --target "$TMP/bad" cudart 2>"$TMP/err"; then
  fail "a wrong sha256 was accepted"
fi
grep -q sha256 "$TMP/err" || fail "the error does not say sha256: $(cat "$TMP/err")"
[[ ! -e "$TMP/bad/usr/local/cuda-$xy/lib64" ]] || fail "something was unpacked"
pass
