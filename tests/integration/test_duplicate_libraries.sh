#!/usr/bin/env bash
# The same library in two layers (docs/layers.md, "Duplicate libraries"): a
# copy layer holds a CUDA-style libcublas.so.12.6.4.1 (soname libcublas.so.12,
# built here with gcc) and a pip layer above installs a wheel, served from a
# PEP 503 index on 127.0.0.1, with its own libcublas.so.12. Two programs in
# the image are linked against libcublas.so.12, one with a RUNPATH to the
# CUDA directory and one to the wheel's; each prints which copy the loader
# gave it. For each `duplicates:` policy the build's report and the unpacked
# image are checked (links, sizes, and the loader's choice inside a chroot):
#   report  both copies stay; a warning names both paths, layers, sizes and
#           versions and what `lower` would save; a summary line; again when cached
#   lower   the wheel's file is a link to the CUDA copy; both programs load it
#   upper   the CUDA path is a link to the wheel's copy; both programs load it
#   error   the build fails at the recipe's key, naming both copies
# and `lower` over an older lower copy is refused. Then the reverse order: the
# CUDA files in a copy layer above the pip layer, `duplicates: lower`.
source "$(dirname "$0")/lib.sh"
require_tool gcc readelf chroot
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
site="usr/local/lib/python$py/site-packages"
cuda="usr/local/cuda-12.6/lib64"

# The libraries and programs. A copy knows which one it is.
mkdir -p "$TMP/src" "$TMP/ctx/cuda/lib64" "$TMP/ctx/bin" "$TMP/wheel"
for who in cuda wheel; do
  printf 'const char* cublas_copy(void) { return "%s"; }\n' "$who" >"$TMP/src/$who.c"
done
gcc -shared -fPIC -Wl,-soname,libcublas.so.12 -o "$TMP/ctx/cuda/lib64/libcublas.so.12.6.4.1" "$TMP/src/cuda.c" ||
  fail "gcc -shared"
ln -s libcublas.so.12.6.4.1 "$TMP/ctx/cuda/lib64/libcublas.so.12"
ln -s libcublas.so.12 "$TMP/ctx/cuda/lib64/libcublas.so"
gcc -shared -fPIC -Wl,-soname,libcublas.so.12 -o "$TMP/wheel/libcublas.so.12" "$TMP/src/wheel.c" || fail "gcc -shared"
cat >"$TMP/src/app.c" <<'C'
#include <stdio.h>
const char* cublas_copy(void);
int main(void) { printf("%s\n", cublas_copy()); return 0; }
C
gcc -o "$TMP/ctx/bin/app-cuda" "$TMP/src/app.c" -L"$TMP/ctx/cuda/lib64" -lcublas \
  -Wl,--enable-new-dtags,-rpath,/usr/local/cuda-12.6/lib64 || fail "gcc app-cuda"
gcc -o "$TMP/ctx/bin/app-wheel" "$TMP/src/app.c" -L"$TMP/ctx/cuda/lib64" -lcublas \
  -Wl,--enable-new-dtags,-rpath,/"$site"/nvidia/cublas/lib || fail "gcc app-wheel"
# The host's C library and loader, at the paths the programs ask for, so they run in a chroot.
libc_items=""
for f in $(ldd "$TMP/ctx/bin/app-cuda" | grep -o '/[^ ]*' | grep -v libcublas); do
  mkdir -p "$TMP/ctx/host$(dirname "$f")" && cp "$(readlink -f "$f")" "$TMP/ctx/host$f" || fail "copying $f"
  libc_items+="{src: host$f, dst: $f}, "
done

# The index: nvidia-cublas-cu12 12.6.4.1 (as the CUDA copy) and 12.8.0.1 (newer).
python3 - "$TMP/index" "$TMP/wheel/libcublas.so.12" <<'PY' || fail "building the index"
import base64, hashlib, os, sys, zipfile
out, lib = sys.argv[1], open(sys.argv[2], "rb").read()
links = []
for version in ("12.6.4.1", "12.8.0.1"):
    di = f"nvidia_cublas_cu12-{version}.dist-info"
    files = {"nvidia/__init__.py": b"", "nvidia/cublas/__init__.py": b"", "nvidia/cublas/lib/libcublas.so.12": lib,
             f"{di}/METADATA": f"Metadata-Version: 2.1\nName: nvidia-cublas-cu12\nVersion: {version}\n".encode(),
             f"{di}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = ""
    for p, data in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{p},sha256={h},{len(data)}\n"
    record += f"{di}/RECORD,,\n"
    fn = f"nvidia_cublas_cu12-{version}-py3-none-any.whl"
    os.makedirs(f"{out}/files", exist_ok=True)
    with zipfile.ZipFile(f"{out}/files/{fn}", "w") as z:
        for p, data in files.items():
            z.writestr(p, data)
        z.writestr(f"{di}/RECORD", record)
    sha = hashlib.sha256(open(f"{out}/files/{fn}", "rb").read()).hexdigest()
    links.append(f'<a href="../../files/{fn}#sha256={sha}">{fn}</a><br/>')
os.makedirs(f"{out}/simple/nvidia-cublas-cu12")
open(f"{out}/simple/nvidia-cublas-cu12/index.html", "w").write("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
PY
serve_dir "$TMP/index"
export PIP_INDEX_URL="$SERVED_URL/simple" PIP_CONFIG_FILE=/dev/null
glibc=$(ldd --version | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')

# recipe NAME POLICY_KEY WHEEL_VERSION [reverse]: writes $TMP/ctx/NAME.yaml.
recipe() {
  local name=$1 key=$2 version=$3 order=${4:-}
  local cuda_layer="  - {name: cuda, copy: [{src: cuda, dst: /usr/local/cuda-12.6}]$key}"
  local wheel_layer="  - {name: wheels, pip: [\"nvidia-cublas-cu12==$version\"]$key}"
  {
    echo "stack: dups"
    echo "platform: {python: \"$py\", glibc: \"$glibc\"}"
    echo "layers:"
    echo "  - {name: system, copy: [$libc_items{src: bin, dst: /usr/bin}]}"
    if [[ $order == reverse ]]; then echo "$wheel_layer"; echo "$cuda_layer"; else echo "$cuda_layer"; echo "$wheel_layer"; fi
    echo "tags: [\"dups:$name\"]"
  } >"$TMP/ctx/$name.yaml"
}

# build NAME: builds $TMP/ctx/NAME.yaml into $TMP/NAME.layout, output in $TMP/NAME.out; then unpacks it to $TMP/NAME.root.
build() {
  sb build "$TMP/ctx/$1.yaml" -o "$TMP/$1.layout" --store "$STORE" >"$TMP/$1.out" 2>&1 ||
    fail "build $1: $(cat "$TMP/$1.out")"
  rm -rf "$TMP/$1.root"
  sb unpack "$TMP/$1.layout:$1" "$TMP/$1.root" --store "$STORE" >/dev/null 2>&1 || fail "unpack $1"
}
# loads ROOT PROGRAM: what the program prints in a chroot of ROOT (which copy the loader gave it).
loads() { chroot "$1" "/usr/bin/$2" 2>&1; }
is_file() { [[ -f "$1" && ! -L "$1" ]] || fail "$1 is not a regular file"; }
link_of() { [[ -L "$1" ]] || fail "$1 is not a symlink"; readlink "$1"; }
wheel_lib="$site/nvidia/cublas/lib/libcublas.so.12"
# human N: N bytes as stackbuild writes them (14.7 KiB).
human() { python3 -c 'import sys
b, u = float(sys.argv[1]), 0
while b >= 1024 and u < 4: b, u = b / 1024, u + 1
print("%.0f B" % b if u == 0 else "%.1f %s" % (b, ["B", "KiB", "MiB", "GiB", "TiB"][u]))' "$1"; }
size=$(human "$(stat -c %s "$TMP/ctx/cuda/lib64/libcublas.so.12.6.4.1")")
wsize=$(human "$(stat -c %s "$TMP/wheel/libcublas.so.12")")

chroot / true 2>/dev/null || skip "chroot is not permitted here (the loader's choice is checked inside one)"

check "report (the default): a warning names both copies, layers, sizes and versions; both stay"
recipe report "" 12.6.4.1
build report
grep -F "layer wheels: libcublas.so.12 twice: /$wheel_lib in layer wheels (12.6.4.1 from the wheel nvidia-cublas-cu12 12.6.4.1, $wsize) and /$cuda/libcublas.so.12.6.4.1 in layer cuda (12.6.4.1 from the file name, $size); \`duplicates: lower\` would save $wsize" \
  "$TMP/report.out" >/dev/null || fail "no duplicate warning: $(cat "$TMP/report.out")"
grep -F "duplicate libraries: 1 second copy of a library a lower layer has; 0 B saved by \`duplicates: lower\`, $wsize still stored twice (1 copy)" \
  "$TMP/report.out" >/dev/null || fail "no summary line: $(cat "$TMP/report.out")"
is_file "$TMP/report.root/$wheel_lib"
is_file "$TMP/report.root/$cuda/libcublas.so.12.6.4.1"
[[ $(loads "$TMP/report.root" app-cuda) == cuda && $(loads "$TMP/report.root" app-wheel) == wheel ]] ||
  fail "two copies, each program its own: $(loads "$TMP/report.root" app-cuda) / $(loads "$TMP/report.root" app-wheel)"

check "a cached rebuild reports the duplicate again"
build report
grep -q "(0 built, 4 from the cache)" "$TMP/report.out" || fail "not cached: $(cat "$TMP/report.out")"
grep -q "libcublas.so.12 twice" "$TMP/report.out" || fail "the cached build did not report: $(cat "$TMP/report.out")"

check "lower: the wheel's copy is a link to the CUDA copy, which both programs load; the layer is smaller"
recipe lower ", duplicates: lower" 12.6.4.1
build lower
[[ $(link_of "$TMP/lower.root/$wheel_lib") == "/$cuda/libcublas.so.12.6.4.1" ]] || fail "link: $(readlink "$TMP/lower.root/$wheel_lib")"
[[ $(loads "$TMP/lower.root" app-cuda) == cuda && $(loads "$TMP/lower.root" app-wheel) == cuda ]] ||
  fail "lower: $(loads "$TMP/lower.root" app-cuda) / $(loads "$TMP/lower.root" app-wheel)"
grep -q "linked to /$cuda/libcublas.so.12.6.4.1, saving $wsize" "$TMP/lower.out" || fail "no saving: $(cat "$TMP/lower.out")"
grep -q "$wsize saved by \`duplicates: lower\`, 0 B still stored twice" "$TMP/lower.out" || fail "summary: $(cat "$TMP/lower.out")"
layer_size() { python3 - "$1" <<'PY'
import json, sys, os
d = sys.argv[1]
idx = json.load(open(f"{d}/index.json"))
m = json.load(open(f"{d}/blobs/" + idx["manifests"][0]["digest"].replace(":", "/")))
print(m["layers"][-2]["size"])  # the wheels layer, below the pip constraints
PY
}
(( $(layer_size "$TMP/lower.layout") < $(layer_size "$TMP/report.layout") )) || fail "the wheels layer is not smaller"

check "upper: the CUDA path is a link to the wheel's copy, which both programs load (no bytes saved, and it says so)"
recipe upper ", duplicates: upper" 12.6.4.1
build upper
[[ $(link_of "$TMP/upper.root/$cuda/libcublas.so.12.6.4.1") == "/$wheel_lib" ]] || fail "upper link"
is_file "$TMP/upper.root/$wheel_lib"
[[ $(loads "$TMP/upper.root" app-cuda) == wheel && $(loads "$TMP/upper.root" app-wheel) == wheel ]] ||
  fail "upper: $(loads "$TMP/upper.root" app-cuda) / $(loads "$TMP/upper.root" app-wheel)"
grep -q "saves nothing: layer cuda still holds its bytes" "$TMP/upper.out" || fail "upper message: $(cat "$TMP/upper.out")"

check "error: the build fails at the duplicates key, naming both copies"
recipe error ", duplicates: error" 12.6.4.1
run_capture error sb build "$TMP/ctx/error.yaml" -o "$TMP/error.layout" --store "$STORE"
(( RC != 0 )) || fail "a duplicate with duplicates: error built"
grep -q "layer wheels holds 1 shared library that a lower layer already has, and its duplicates policy is error" "$TMP/error.err" ||
  { show_output error; fail "the error does not say what"; }
grep -q "error.yaml:6:[0-9]*" "$TMP/error.err" || { show_output error; fail "no recipe location"; }
grep -q "/$wheel_lib" "$TMP/error.err" && grep -q "/$cuda/libcublas.so.12.6.4.1" "$TMP/error.err" ||
  { show_output error; fail "the error does not name both copies"; }

check "lower over an older lower copy (12.6.4.1 under a wheel of 12.8.0.1) is refused"
recipe older ", duplicates: lower" 12.8.0.1
run_capture older sb build "$TMP/ctx/older.yaml" -o "$TMP/older.layout" --store "$STORE"
(( RC != 0 )) || fail "lower over an older copy built"
grep -q "a link to the older /$cuda/libcublas.so.12.6.4.1 (12.6.4.1" "$TMP/older.err" || { show_output older; fail "reason"; }
grep -q "duplicates: upper" "$TMP/older.err" || { show_output older; fail "no way out offered"; }

check "the reverse order: CUDA files in a copy layer above the pip layer, duplicates: lower"
recipe reverse ", duplicates: lower" 12.6.4.1 reverse
build reverse
grep -q "layer cuda: libcublas.so.12 twice: /$cuda/libcublas.so.12.6.4.1 in layer cuda .* and /$wheel_lib in layer wheels" \
  "$TMP/reverse.out" || fail "reverse warning: $(cat "$TMP/reverse.out")"
[[ $(link_of "$TMP/reverse.root/$cuda/libcublas.so.12.6.4.1") == "/$wheel_lib" ]] || fail "reverse link"
[[ $(loads "$TMP/reverse.root" app-cuda) == wheel && $(loads "$TMP/reverse.root" app-wheel) == wheel ]] ||
  fail "reverse: $(loads "$TMP/reverse.root" app-cuda) / $(loads "$TMP/reverse.root" app-wheel)"

pass
