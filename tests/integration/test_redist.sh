#!/usr/bin/env bash
# The redist source against a fixture mirror on 127.0.0.1 made from this
# machine's CUDA toolkit (tests/integration/redist_mirror.py): `stackbuild
# redist` unpacks cudart and nvcc into usr/local/cuda-X.Y and the nvcc there
# runs; a recipe with `use: cuda` and `use: [cudnn, nccl]` builds from the
# catalog's redist data (cuDNN's variant for the point's CUDA major, NCCL's
# manifest-less tarball); `lock` pins every archive and `build --locked`
# fetches exactly those (no manifest read), refusing a tampered or stale lock;
# a wrong sha256 in a manifest fails with nothing unpacked.
source "$(dirname "$0")/lib.sh"
cuda=$(readlink -f /usr/local/cuda 2>/dev/null || true)
[[ -n "$cuda" && -x "$cuda/bin/nvcc" ]] || skip "no CUDA toolkit with nvcc at /usr/local/cuda"
xy=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
[[ -n "$xy" ]] || skip "cannot read nvcc's release"
[[ -f "$cuda/include/cudnn_version.h" && -e "$cuda/lib64/libcudnn.so.9" && -f "$cuda/include/nccl.h" ]] ||
  skip "no cuDNN 9 and NCCL beside the CUDA toolkit"

# The recipe, and what the catalog resolves it to on this machine's CUDA.
mkdir -p "$TMP/r"
cat >"$TMP/r/cb.yaml" <<YAML
stack: cb
matrix:
  cuda: ["$xy"]
layers:
  - {name: cuda, use: cuda, version: "\${cuda}", components: [cudart]}
  - {name: dl, use: [cudnn, nccl]}
tags: ["cb:t"]
YAML
cat_opt=(--catalog "$SB_SOURCE_DIR/layers")
sb plan "$TMP/r/cb.yaml" "${cat_opt[@]}" --json >"$TMP/plan.json" || fail "plan: $(cat "$TMP/plan.json")"
read -r cudav cudnnv ncclv ncclb < <(python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))['points'][0]['resolved']
print(s['versions']['cuda'], s['versions']['cudnn'], s['versions']['nccl'], s['builds']['nccl'])" "$TMP/plan.json") ||
  fail "the plan did not resolve: $(cat "$TMP/plan.json")"
say "resolved cuda $cudav, cudnn $cudnnv, nccl $ncclv ($ncclb)"

python3 "$HERE/redist_mirror.py" "$cuda" "$TMP/mirror" "$cudav" --cudnn "$(cut -d. -f1-3 <<<"$cudnnv")=$cudnnv" \
  --nccl "$ncclv+$ncclb" || fail "building the mirror"
port_file="$TMP/port"
python3 - "$TMP/mirror" "$port_file" "$TMP/requests" <<'PY' &
import functools, http.server, sys
log = open(sys.argv[3], "a", buffering=1)
class Logged(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        log.write(self.path + "\n")
        super().do_GET()
h = functools.partial(Logged, directory=sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
server=$!
trap 'kill $server 2>/dev/null; cleanup' EXIT
for _ in $(seq 50); do [[ -s $port_file ]] && break; sleep 0.1; done
base="http://127.0.0.1:$(cat "$port_file")"
export STACKBUILD_REDIST_URL=$base

check "stackbuild redist unpacks cudart and nvcc (with its dependencies) into usr/local/cuda-$xy"
sb redist --store "$STORE" --base-url "$base" --version "$cudav" --target "$TMP/root" nvcc >"$TMP/out" ||
  fail "stackbuild redist failed"
grep -q '^cuda_cudart ' "$TMP/out" || fail "nvcc did not bring cuda_cudart: $(cat "$TMP/out")"
[[ $(readlink "$TMP/root/usr/local/cuda") == "cuda-$xy" ]] || fail "usr/local/cuda does not point at cuda-$xy"
[[ -e "$TMP/root/usr/local/cuda-$xy/lib64/libcudart.so.${xy%%.*}" ]] || fail "no lib64/libcudart.so.${xy%%.*}"
[[ -f "$TMP/root/usr/local/cuda-$xy/share/doc/cuda_nvcc/LICENSE" ]] || fail "no LICENSE under share/doc"
python3 - "$TMP/root/usr/local/cuda-$xy/version.json" "$cudav" <<'PY' || fail "no version.json as NVIDIA's installer writes it"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["cuda"] == {"name": "CUDA SDK", "version": sys.argv[2]}, j
assert {"cuda_cudart", "cuda_nvcc"} <= set(j) and all("version" in v for v in j.values()), j
PY

check "the unpacked nvcc prints release $xy"
"$TMP/root/usr/local/cuda/bin/nvcc" --version | grep -q "release $xy" || fail "nvcc --version: $("$TMP/root/usr/local/cuda/bin/nvcc" --version)"

check "a recipe with use: cuda and use: [cudnn, nccl] builds from the mirror; its SBOM lists them"
sb build "$TMP/r/cb.yaml" "${cat_opt[@]}" --store "$STORE" -o "$TMP/l1" >"$TMP/b1" 2>&1 || fail "build: $(cat "$TMP/b1")"
sb unpack "$TMP/l1:t" "$TMP/u1" --store "$STORE" >/dev/null 2>&1 || fail "unpack failed"
lib="$TMP/u1/usr/local/cuda-$xy"
[[ -f "$lib/include/cudnn_version.h" && -e "$lib/lib64/libcudnn.so.9" ]] || fail "no cuDNN in usr/local/cuda-$xy"
[[ -f "$lib/include/nccl.h" && -f "$lib/share/doc/nccl/LICENSE.txt" ]] || fail "no NCCL in usr/local/cuda-$xy"
[[ -e "$lib/lib64/libcudart.so.${xy%%.*}" ]] || fail "no cudart"
grep -q "_cuda${xy%%.*}-archive" "$TMP/requests" || fail "cuDNN's cuda${xy%%.*} variant was not fetched: $(cat "$TMP/requests")"
! grep -q "_cuda$(( ${xy%%.*} == 12 ? 13 : 12 ))-archive" "$TMP/requests" || fail "the other cuDNN variant was fetched"
[[ -f "$lib/version.json" ]] || fail "no version.json in usr/local/cuda-$xy"
sb sbom "$TMP/l1:t" --store "$STORE" -o "$TMP/sbom.json" >/dev/null 2>&1 || fail "sbom of the redist image failed"
# The mirror's archives hold this machine's headers: their versions are what the SBOM must say.
python3 - "$TMP/sbom.json" "$cudav" "$lib/include" <<'PY' || fail "the SBOM misses the redist components"
import json, re, sys
d = json.load(open(sys.argv[1]))
purls = {p["externalRefs"][0]["referenceLocator"] for p in d["packages"]}
def header(name, prefix):
    text = open(f"{sys.argv[3]}/{name}").read()
    part = lambda *ns: next(m.group(1) for n in ns for m in [re.search(rf"#define {prefix}{n} +(\d+)", text)] if m)
    return ".".join([part("MAJOR"), part("MINOR"), part("PATCHLEVEL", "PATCH")])
for want in ("pkg:generic/nvidia/cuda@" + sys.argv[2], "pkg:generic/nvidia/cudnn@" + header("cudnn_version.h", "CUDNN_"),
             "pkg:generic/nvidia/nccl@" + header("nccl.h", "NCCL_")):
    assert want in purls, (want, sorted(purls))
assert any(p.startswith("pkg:generic/nvidia/cuda_cudart@") for p in purls), sorted(purls)
PY
d1=$(sed -n 's/^cb:t: //p' "$TMP/b1")
[[ -n $d1 ]] || fail "no digest: $(cat "$TMP/b1")"

check "a redist layer's cache key holds its parent and its name: another of either builds it again"
echo base >"$TMP/r/base.txt"
sed 's|^layers:$|layers:\n  - {name: base, copy: [{src: base.txt, dst: /base.txt}]}|' "$TMP/r/cb.yaml" >"$TMP/r/cb-parent.yaml"
sed 's|{name: cuda, use: cuda|{name: cudax, use: cuda|' "$TMP/r/cb.yaml" >"$TMP/r/cb-name.yaml"
for v in parent name; do
  sb build "$TMP/r/cb-$v.yaml" "${cat_opt[@]}" --store "$STORE" -o "$TMP/l-$v" >"$TMP/b-$v" 2>&1 || fail "build: $(cat "$TMP/b-$v")"
  grep -q "layer cuda.*: cached" "$TMP/b-$v" && fail "another $v, yet layer cuda came from the cache: $(cat "$TMP/b-$v")"
  grep -Eq "layers: 3 \(3 built|layers: 2 \([12] built" "$TMP/b-$v" || fail "no layer built for another $v: $(grep 'layers:' "$TMP/b-$v")"
done

check "over --layer-budget 1 the redist layers split by component, the cuda link last; stacked, the same tree"
for run in a b; do  # two stores: the second build shares nothing with the first
  sb build "$TMP/r/cb.yaml" "${cat_opt[@]}" --store "$TMP/store-$run" -o "$TMP/split-$run" --layer-budget 1 \
    >"$TMP/split-$run.out" 2>&1 || fail "split build: $(cat "$TMP/split-$run.out")"
done
grep -q "layer dl (2 archives): .* split by component into 3 layers" "$TMP/split-a.out" ||
  fail "no split of layer dl reported: $(cat "$TMP/split-a.out")"
[[ $(image_digests "$TMP/split-a" t) == "$(image_digests "$TMP/split-b" t)" ]] || fail "two split builds differ"
python3 "$HERE/split_parts.py" "$TMP/split-a" t >"$TMP/parts" || fail "the split parts are not sound (above)"
grep -qx "parts cuda redist 2" "$TMP/parts" && grep -qx "parts dl redist 3" "$TMP/parts" ||
  fail "not cuda_cudart, shared | cudnn, nccl, shared: $(grep ^parts "$TMP/parts")"
part_of() { awk -v n="$1" -v p="$2" '$1 == "entry" && $3 == n && $4 == p { print $2 }' "$TMP/parts"; }
[[ $(part_of cuda "usr/local/cuda-$xy/lib64/libcudart.so.${xy%%.*}") == 0 && $(part_of cuda usr/local/cuda) == 1 ]] ||
  fail "cudart is not in the first part of layer cuda, or the cuda link not in the last"
[[ $(part_of dl "usr/local/cuda-$xy/include/cudnn_version.h") == 2 && $(part_of dl "usr/local/cuda-$xy/include/nccl.h") == 3 &&
  $(part_of dl usr/local/cuda) == 4 ]] || fail "layer dl is not cudnn | nccl | shared: $(grep ' dl ' "$TMP/parts")"
sb unpack "$TMP/split-a:t" "$TMP/split-root" --store "$TMP/store-a" >/dev/null 2>&1 || fail "unpack of the split image"
python3 "$HERE/treecmp.py" "$TMP/u1" "$TMP/split-root" >"$TMP/cmp" 2>&1 || fail "the split image differs: $(cat "$TMP/cmp")"

check "lock pins every archive with its sha256; build --locked in a new store fetches exactly those"
: >"$TMP/requests"
sb lock "$TMP/r/cb.yaml" "${cat_opt[@]}" --store "$STORE" >"$TMP/lockout" 2>&1 || fail "lock: $(cat "$TMP/lockout")"
! grep -q 'nccl_.*txz' "$TMP/requests" || fail "the NCCL tarball the store has was fetched again"
lockf="$TMP/r/cb.yaml.lock"
python3 - "$lockf" <<'PY' || fail "the lock lacks archives: $(cat "$lockf")"
import json, sys
p = json.load(open(sys.argv[1]))["points"][0]
arch = [a for layer in p["redist"].values() for a in layer["archives"]]
comps = sorted(a["component"] for a in arch)
assert comps == ["cuda_cudart", "cudnn", "nccl"], comps
assert all(len(a["sha256"]) == 64 and a["size"] > 0 and a["url"].startswith("http://127.0.0.1:") for a in arch), arch
PY
mv "$TMP/mirror/cuda/redist/redistrib_$cudav.json" "$TMP/manifest.away"  # a locked build reads no manifest
: >"$TMP/requests"
sb build "$TMP/r/cb.yaml" "${cat_opt[@]}" --store "$TMP/store2" -o "$TMP/l2" --locked >"$TMP/b2" 2>&1 ||
  fail "build --locked: $(cat "$TMP/b2")"
[[ $(sed -n 's/^cb:t: //p' "$TMP/b2") == "$d1" ]] || fail "the locked build differs: $(cat "$TMP/b2")"
[[ $(grep -c . "$TMP/requests") == 3 ]] && ! grep -q redistrib "$TMP/requests" ||
  fail "build --locked fetched more than the 3 pinned archives: $(cat "$TMP/requests")"
mv "$TMP/manifest.away" "$TMP/mirror/cuda/redist/redistrib_$cudav.json"

check "a tampered sha256 in the lock is refused and nothing is built"
python3 - "$lockf" <<'PY'
import json, sys
lock = json.load(open(sys.argv[1]))
lock["points"][0]["redist"]["dl"]["archives"][0]["sha256"] = "0" * 64
json.dump(lock, open(sys.argv[1], "w"), indent=2)
PY
if sb build "$TMP/r/cb.yaml" "${cat_opt[@]}" --store "$TMP/store3" -o "$TMP/l3" --locked >"$TMP/b3" 2>&1; then
  fail "a tampered lock was accepted"
fi
grep -q "sha256" "$TMP/b3" || fail "the error does not say sha256: $(cat "$TMP/b3")"
[[ ! -e "$TMP/l3" ]] || fail "an image was written"

check "a lock written for other components is refused, naming the layer"
sb lock "$TMP/r/cb.yaml" "${cat_opt[@]}" --store "$STORE" >/dev/null 2>&1 || fail "lock again"
sed -i 's/components: \[cudart\]/components: [cudart, nvcc]/' "$TMP/r/cb.yaml"
if sb build "$TMP/r/cb.yaml" "${cat_opt[@]}" --store "$STORE" -o "$TMP/l4" --locked >"$TMP/b4" 2>&1; then
  fail "a stale lock was accepted"
fi
grep -q "layer 'cuda'.*requests" "$TMP/b4" || fail "the error does not name the layer: $(cat "$TMP/b4")"

check "an https mirror with a private CA: untrusted, with a hint; SSL_CERT_FILE names the CA"
make_ca "$TMP/ca"
serve_dir "$TMP/mirror" "$TMP/ca"
if sb redist --store "$TMP/store6" --base-url "$SERVED_URL" --version "$cudav" --target "$TMP/tls1" cudart 2>"$TMP/tls1.err"; then
  fail "a certificate from an unknown CA was accepted"
fi
grep -q "certificate.*name a bundle with SSL_CERT_FILE" "$TMP/tls1.err" || fail "no hint for an untrusted certificate: $(cat "$TMP/tls1.err")"
SSL_CERT_FILE="$TMP/ca/ca.pem" sb redist --store "$TMP/store6" --base-url "$SERVED_URL" --version "$cudav" --target "$TMP/tls2" \
  cudart >/dev/null 2>"$TMP/tls2.err" || fail "SSL_CERT_FILE was not trusted: $(cat "$TMP/tls2.err")"
[[ -e "$TMP/tls2/usr/local/cuda-$xy/lib64/libcudart.so.${xy%%.*}" ]] || fail "nothing unpacked over https"

check "a wrong sha256 in the manifest fails and unpacks nothing"
m="$TMP/mirror/cuda/redist/redistrib_$cudav.json"
python3 -c "import json,sys; m=json.load(open('$m')); m['cuda_cudart']['linux-x86_64']['sha256']='0'*64; json.dump(m, open('$m','w'))"
if sb redist --store "$TMP/store5" --base-url "$base" --version "$cudav" --target "$TMP/bad" cudart 2>"$TMP/err"; then
  fail "a wrong sha256 was accepted"
fi
grep -q sha256 "$TMP/err" || fail "the error does not say sha256: $(cat "$TMP/err")"
[[ ! -e "$TMP/bad/usr/local/cuda-$xy/lib64" ]] || fail "something was unpacked"
pass
