#!/usr/bin/env bash
# The pip source against a static PEP 503 index on 127.0.0.1
# (tests/integration/pip_index.py): `stackbuild pip` resolves for the host's
# Python, installs without pip into a root, and the real pip sees the result:
# `pip list --path` lists the projects, `pip check` is clean, the console
# script runs. The index URL also comes from PIP_INDEX_URL. A recipe's pip:
# layer builds (the glibc from `platform:`), `lock` pins its wheels and
# `build --locked` fetches exactly those, refusing a tampered or stale lock;
# an index served over HTTPS by a private CA (pip.conf's `cert`, or its
# `trusted-host`) works for lock and build --locked alike, and pip.conf's
# `proxy` carries every request.
source "$(dirname "$0")/lib.sh"
python3 -m pip --version >/dev/null 2>&1 || skip "no pip for python3"
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
glibc=$(ldd --version | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')

python3 "$HERE/pip_index.py" "$TMP/index" || fail "building the index"
serve_dir "$TMP/index"
index="$SERVED_URL/simple"

check "torchy resolves to 2.0 with helper 1.1 and nvidia-fake-cu12 1.2.5, not the win32 dependency"
PIP_INDEX_URL=$index PIP_CONFIG_FILE=/dev/null sb pip --store "$STORE" --python "$py" --glibc "$glibc" \
  --target "$TMP/root" torchy >"$TMP/out" || fail "stackbuild pip failed"
got=$(awk '{print $1 "==" $2}' "$TMP/out" | sort | tr '\n' ' ')
[[ $got == "helper==1.1 nvidia-fake-cu12==1.2.5 torchy==2.0 " ]] || fail "resolved: $got"

site="$TMP/root/usr/local/lib/python$py/site-packages"
check "pip list --path sees what was installed"
python3 -m pip list --path "$site" --format freeze >"$TMP/list" 2>/dev/null || fail "pip list failed"
for p in torchy==2.0 helper==1.1 nvidia-fake-cu12==1.2.5; do grep -qx "$p" "$TMP/list" || fail "pip list lacks $p: $(cat "$TMP/list")"; done

check "pip check is clean over the installed projects"
python3 -m venv --without-pip "$TMP/venv" || skip "python3 -m venv is missing"
mkdir -p "$TMP/pipdir" && cp -r "$(python3 -c 'import pip, os; print(os.path.dirname(pip.__file__))')" "$TMP/pipdir/"
out=$(PYTHONPATH="$site:$TMP/pipdir" "$TMP/venv/bin/python" -m pip check 2>&1) || fail "pip check: $out"
say "pip check: $out"

check "the console script runs with the image's interpreter"
[[ $(head -1 "$TMP/root/usr/local/bin/help-me") == "#!/usr/bin/python3" ]] || fail "shebang: $(head -1 "$TMP/root/usr/local/bin/help-me")"
[[ $(PYTHONPATH="$site" "$TMP/root/usr/local/bin/help-me") == "helper 1.1" ]] || fail "help-me did not run"
! find "$TMP/root" -name '*.pyc' | grep -q . || fail "a .pyc was written"

check "the layer is the same twice, from two stores"
one=$(PIP_INDEX_URL=$index sb pip --store "$STORE" --python "$py" --glibc "$glibc" --layer torchy 2>&1 | sed -n 's/^digest: //p')
two=$(PIP_INDEX_URL=$index sb pip --store "$TMP/s2" --python "$py" --glibc "$glibc" --layer torchy 2>&1 | sed -n 's/^digest: //p')
[[ -n $one && $one == "$two" ]] || fail "layer digests differ: $one / $two"

check "without an os layer or platform: the build names the platform key"
mkdir -p "$TMP/recipe" && echo hi >"$TMP/recipe/a"
cat >"$TMP/recipe/r.yaml" <<YAML
stack: pt
matrix:
  python: ["$py"]
layers:
  - {name: base, copy: [{src: a, dst: /etc/a}]}
  - {name: wheels, pip: [torchy]}
tags: ["pt:t"]
YAML
if PIP_INDEX_URL=$index PIP_CONFIG_FILE=/dev/null sb build "$TMP/recipe/r.yaml" -o "$TMP/layout" --store "$STORE" \
  >"$TMP/build.out" 2>&1; then fail "built without knowing the glibc"; fi
grep -q "platform: {glibc" "$TMP/build.out" || fail "the error does not name platform: $(cat "$TMP/build.out")"

check "stackbuild build installs a recipe's pip: layer (platform: says the glibc), cached on a rebuild"
sed -i "s/^layers:/platform: {glibc: \"$glibc\"}\nlayers:/" "$TMP/recipe/r.yaml"
for run in 1 2; do
  PIP_INDEX_URL=$index PIP_CONFIG_FILE=/dev/null sb build "$TMP/recipe/r.yaml" \
    -o "$TMP/layout" --store "$STORE" >"$TMP/build.out" 2>&1 || fail "build with a pip layer: $(cat "$TMP/build.out")"
done
grep -q "(0 built, 3 from the cache)" "$TMP/build.out" || fail "the rebuild was not cached: $(cat "$TMP/build.out")"
d1=$(sed -n 's/^pt:t: //p' "$TMP/build.out")
sb unpack "$TMP/layout:t" "$TMP/unpacked" --store "$STORE" 2>/dev/null || fail "unpack failed"
[[ -d "$TMP/unpacked/usr/local/lib/python$py/site-packages/torchy-2.0.dist-info" ]] || fail "torchy is not in the image"

check "the image pins its Python packages (/etc/pip/constraint.txt, PIP_CONSTRAINT): pip refuses to replace torchy"
cons="$TMP/unpacked/etc/pip/constraint.txt"
grep -qx "torchy==2.0" "$cons" && grep -qx "helper==1.1" "$cons" || fail "the constraint file: $(cat "$cons" 2>&1)"
python3 - "$TMP/layout" <<'PY' || fail "the image's config has no PIP_CONSTRAINT"
import json, sys
d = sys.argv[1]
idx = json.load(open(d + "/index.json"))
m = json.load(open(d + "/blobs/sha256/" + idx["manifests"][0]["digest"][7:]))
c = json.load(open(d + "/blobs/sha256/" + m["config"]["digest"][7:]))
sys.exit(0 if "PIP_CONSTRAINT=/etc/pip/constraint.txt" in c["config"]["Env"] else 1)
PY
pip_try() {  # pip's own resolver, as in the image: nothing is installed (--dry-run)
  PIP_CONFIG_FILE=/dev/null PIP_CONSTRAINT="$cons" python3 -m pip install --dry-run --break-system-packages \
    --ignore-installed --no-deps --index-url "$index" "$@"
}
pip_try torchy==2.0 >"$TMP/pip-same.out" 2>&1 || fail "pip refused what the image holds: $(cat "$TMP/pip-same.out")"
if pip_try torchy==1.0 >"$TMP/pip-other.out" 2>&1; then fail "pip would replace torchy 2.0 with 1.0 under the constraint"; fi
grep -qi "conflict\|cannot install" "$TMP/pip-other.out" || fail "pip failed for another reason: $(cat "$TMP/pip-other.out")"

check "lock pins the wheels by file and sha256 (no URL, no host); build --locked in a new store finds them on the index, resolving nothing, and builds the same image"
PIP_INDEX_URL=$index PIP_CONFIG_FILE=/dev/null sb lock "$TMP/recipe/r.yaml" --store "$STORE" >"$TMP/lock.out" 2>&1 ||
  fail "lock: $(cat "$TMP/lock.out")"
python3 - "$TMP/recipe/r.yaml.lock" <<'PY' || fail "the lock lacks the wheels: $(cat "$TMP/recipe/r.yaml.lock")"
import json, sys
e = json.load(open(sys.argv[1]))["points"][0]["pip"]["wheels"]
got = sorted((w["name"], w["version"]) for w in e["wheels"])
assert got == [("helper", "1.1"), ("nvidia-fake-cu12", "1.2.5"), ("torchy", "2.0")], got
assert all(len(w["sha256"]) == 64 and "url" not in w and w["filename"].endswith(".whl") for w in e["wheels"])
assert e["requirements"] == ["torchy"], e
PY
PIP_INDEX_URL=$index PIP_CONFIG_FILE=/dev/null sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout2" \
  --store "$TMP/s3" >"$TMP/build2.out" 2>&1 || fail "build --locked: $(cat "$TMP/build2.out")"
[[ $(sed -n 's/^pt:t: //p' "$TMP/build2.out") == "$d1" && -n $d1 ]] || fail "the locked image differs: $(cat "$TMP/build2.out")"
check "a pinned file the index no longer has is refused by name (a --locked build in an empty store)"
mv "$TMP/index/simple" "$TMP/index/simple.away"
if PIP_INDEX_URL=$index PIP_CONFIG_FILE=/dev/null sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout2b" \
  --store "$TMP/s3b" >"$TMP/build2b.out" 2>&1; then fail "built without the index's files"; fi
grep -q "helper-1.1-py3-none-any.whl\|torchy-2.0\|nvidia_fake" "$TMP/build2b.out" || fail "the error names no file: $(cat "$TMP/build2b.out")"
mv "$TMP/index/simple.away" "$TMP/index/simple"

check "an index behind a private CA (pip.conf's cert): lock, then build --locked in a new store trusts it for the wheels too"
if command -v openssl >/dev/null; then
  make_ca "$TMP/ca"
  serve_dir "$TMP/index" "$TMP/ca"
  printf '[global]\nindex-url = %s/simple\ncert = %s\n' "$SERVED_URL" "$TMP/ca/ca.pem" >"$TMP/pip-tls.conf"
  mkdir -p "$TMP/tls" && cp "$TMP/recipe/r.yaml" "$TMP/recipe/a" "$TMP/tls/"
  tls_pip() { env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_CERT PIP_CONFIG_FILE="$TMP/pip-tls.conf" "$@"; }
  # The HTML pages give no sizes, so lock fetches every wheel; build --locked
  # in an empty store fetches them again.
  tls_pip "$SB" lock "$TMP/tls/r.yaml" --store "$TMP/s-tls1" --progress plain >"$TMP/tls-lock.out" 2>&1 ||
    fail "lock over TLS: $(cat "$TMP/tls-lock.out")"
  if grep -q '"url"' "$TMP/tls/r.yaml.lock"; then fail "the lock holds URLs"; fi
  tls_pip "$SB" build "$TMP/tls/r.yaml" --locked -o "$TMP/layout-tls" --store "$TMP/s-tls2" --progress plain \
    >"$TMP/tls-build.out" 2>&1 || fail "build --locked over TLS: $(cat "$TMP/tls-build.out")"
  [[ $(sed -n 's/^pt:t: //p' "$TMP/tls-build.out") == "$d1" ]] || fail "the image differs: $(cat "$TMP/tls-build.out")"
  check "without the cert the same build is refused, naming the certificate"
  printf '[global]\nindex-url = %s/simple\n' "$SERVED_URL" >"$TMP/pip-tls.conf"
  if tls_pip "$SB" build "$TMP/tls/r.yaml" --locked -o "$TMP/layout-tls2" --store "$TMP/s-tls3" --progress plain \
    >"$TMP/tls-bad.out" 2>&1; then fail "a server signed by an unknown CA was trusted"; fi
  grep -qi "certificate" "$TMP/tls-bad.out" || fail "the error: $(cat "$TMP/tls-bad.out")"
  grep -q "pip's \`cert\` (pip.conf or PIP_CERT)" "$TMP/tls-bad.out" ||
    fail "the error does not say where the CA goes: $(cat "$TMP/tls-bad.out")"
  check "trusted-host 127.0.0.1 instead of the cert: the same locked build succeeds"
  printf '[global]\nindex-url = %s/simple\ntrusted-host = 127.0.0.1\n' "$SERVED_URL" >"$TMP/pip-tls.conf"
  tls_pip "$SB" build "$TMP/tls/r.yaml" --locked -o "$TMP/layout-tls3" --store "$TMP/s-tls4" --progress plain \
    >"$TMP/tls-trusted.out" 2>&1 || fail "build --locked with trusted-host: $(cat "$TMP/tls-trusted.out")"
  [[ $(sed -n 's/^pt:t: //p' "$TMP/tls-trusted.out") == "$d1" ]] || fail "the image differs: $(cat "$TMP/tls-trusted.out")"
else
  say "skipped: no openssl"
fi

check "pip.conf's proxy: lock and build --locked send the pages and the wheels through it, the same image"
: >"$TMP/proxy.log"
net_server proxy "$TMP/proxy.log"
printf '[global]\nindex-url = %s\nproxy = %s\n' "$index" "$NET_URL" >"$TMP/pip-proxy.conf"
mkdir -p "$TMP/proxied" && cp "$TMP/recipe/r.yaml" "$TMP/recipe/a" "$TMP/proxied/"
proxy_pip() { env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_PROXY PIP_CONFIG_FILE="$TMP/pip-proxy.conf" "$@"; }
proxy_pip "$SB" lock "$TMP/proxied/r.yaml" --store "$TMP/s-proxy1" --progress plain >"$TMP/proxy-lock.out" 2>&1 ||
  fail "lock through the proxy: $(cat "$TMP/proxy-lock.out")"
grep -q "^$index/torchy/" "$TMP/proxy.log" || fail "no index page went through the proxy: $(cat "$TMP/proxy.log")"
: >"$TMP/proxy.log"
proxy_pip "$SB" build "$TMP/proxied/r.yaml" --locked -o "$TMP/layout-proxy" --store "$TMP/s-proxy2" --progress plain \
  >"$TMP/proxy-build.out" 2>&1 || fail "build --locked through the proxy: $(cat "$TMP/proxy-build.out")"
grep -q '\.whl$' "$TMP/proxy.log" || fail "no wheel went through the proxy: $(cat "$TMP/proxy.log")"
[[ $(sed -n 's/^pt:t: //p' "$TMP/proxy-build.out") == "$d1" ]] || fail "the image differs: $(cat "$TMP/proxy-build.out")"

check "a tampered wheel sha256 in the lock is refused"
cp "$TMP/recipe/r.yaml.lock" "$TMP/good.lock"
sed -i '0,/"sha256": "[0-9a-f]\{64\}"/s//"sha256": "'"$(printf '0%.0s' {1..64})"'"/' "$TMP/recipe/r.yaml.lock"
if PIP_INDEX_URL=$index sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout3" --store "$TMP/s4" \
  >"$TMP/build3.out" 2>&1; then fail "a tampered lock was accepted"; fi
grep -q "sha256" "$TMP/build3.out" || fail "the error does not say sha256: $(cat "$TMP/build3.out")"

check "a malformed wheel entry (a negative size) is refused before anything is fetched: exit 3, the file and the item"
cp "$TMP/good.lock" "$TMP/recipe/r.yaml.lock"
python3 - "$TMP/recipe/r.yaml.lock" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["points"][0]["pip"]["wheels"]["wheels"][1]["size"] = -5
json.dump(j, open(sys.argv[1], "w"))
PY
rc=0
PIP_INDEX_URL=$index sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout5" --store "$TMP/s5" \
  >"$TMP/build5.out" 2>&1 || rc=$?
[[ $rc == 3 ]] || fail "exit $rc, not 3: $(cat "$TMP/build5.out")"
grep -q "lockfile $TMP/recipe/r.yaml.lock does not pin" "$TMP/build5.out" || fail "the file: $(cat "$TMP/build5.out")"
grep -q "layer 'wheels'.*wheels\[1\]: size is -5, not a size in bytes" "$TMP/build5.out" ||
  fail "the item: $(cat "$TMP/build5.out")"
[[ ! -e $TMP/layout5 && ! -e $TMP/s5/blobs ]] || fail "something was written: $(ls -R "$TMP/layout5" "$TMP/s5" 2>&1 | head)"
python3 - "$TMP/recipe/r.yaml.lock" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["points"][0]["pip"]["wheels"]["wheels"][1]["size"] = 900
j["points"][0]["pip"]["wheels"]["wheels"][0]["url"] = 5
json.dump(j, open(sys.argv[1], "w"))
PY
rc=0
PIP_INDEX_URL=$index sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout5" --store "$TMP/s5" \
  >"$TMP/build5.out" 2>&1 || rc=$?
[[ $rc == 3 ]] || fail "exit $rc, not 3: $(cat "$TMP/build5.out")"
grep -q "wheels\[0\]: .*(/points/0/pip/wheels/wheels/0/url) type must be string" "$TMP/build5.out" ||
  fail "the JSON pointer in the file: $(cat "$TMP/build5.out")"

check "a lock written for other requirements is refused, naming the layer"
cp "$TMP/good.lock" "$TMP/recipe/r.yaml.lock"
sed -i 's/pip: \[torchy\]/pip: [torchy, helper]/' "$TMP/recipe/r.yaml"
if PIP_INDEX_URL=$index sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout4" --store "$STORE" \
  >"$TMP/build4.out" 2>&1; then fail "a stale lock was accepted"; fi
grep -q "layer 'wheels'.*requirements" "$TMP/build4.out" || fail "the error: $(cat "$TMP/build4.out")"
sed -i 's/pip: \[torchy, helper\]/pip: [torchy]/' "$TMP/recipe/r.yaml"  # back to the recipe the checks below compare with
check "over --layer-budget, the pip layer is split by distribution; the image's files are the same"
for run in 1 2; do
  STACKBUILD_PIP_GLIBC=$glibc PIP_INDEX_URL=$index PIP_CONFIG_FILE=/dev/null sb build "$TMP/recipe/r.yaml" \
    -o "$TMP/split" --store "$STORE" --layer-budget 1 >"$TMP/split.out" 2>&1 || fail "split build: $(cat "$TMP/split.out")"
done
n=$(json "$TMP/split/blobs/sha256/$(manifest_digest "$TMP/split" t)" 'len(j["layers"])')
[[ $n -ge 5 ]] || fail "the split image has $n layers, expected the base, one per distribution (3 or more) and the pip constraints"
grep -q "(0 built, 3 from the cache)" "$TMP/split.out" || fail "the split rebuild was not cached: $(cat "$TMP/split.out")"
sb unpack "$TMP/split:t" "$TMP/unpacked-split" --store "$STORE" 2>/dev/null || fail "unpack of the split image failed"
diff -r "$TMP/unpacked" "$TMP/unpacked-split" || fail "the split image holds other files"

check "pip: items expand \${vars} per matrix point (torchy==\${torchy_v} for torchy_v 1.0 and 2.0)"
cat >"$TMP/recipe/v.yaml" <<YAML
stack: pv
platform: {glibc: "$glibc"}
matrix:
  python: ["$py"]
  torchy_v: ["1.0", "2.0"]
layers:
  - {name: base, copy: [{src: a, dst: /etc/a}]}
  - {name: wheels, pip: ["torchy==\${torchy_v}"]}
tags: ["pv:\${torchy_v}"]
YAML
PIP_INDEX_URL=$index PIP_CONFIG_FILE=/dev/null sb build "$TMP/recipe/v.yaml" -o "$TMP/vlayout" --store "$STORE" \
  >"$TMP/v.out" 2>&1 || fail "build with \${vars} in pip: $(cat "$TMP/v.out")"
for v in 1.0 2.0; do
  sb unpack "$TMP/vlayout:$v" "$TMP/v-$v" --store "$STORE" 2>/dev/null || fail "unpack of pv:$v failed"
  [[ -d "$TMP/v-$v/usr/local/lib/python$py/site-packages/torchy-$v.dist-info" ]] || fail "pv:$v does not hold torchy $v"
done

check "an unknown project is a clear error"
if PIP_INDEX_URL=$index sb pip --store "$STORE" --python "$py" no-such-thing 2>"$TMP/err"; then fail "resolved nothing"; fi
grep -q "no wheel of no-such-thing" "$TMP/err" || fail "error: $(cat "$TMP/err")"
pass
