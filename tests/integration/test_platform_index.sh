#!/usr/bin/env bash
# Matrix key `platform` (issue 36): a recipe of copy layers and an apt layer from a
# fixture repository with amd64 and arm64 .debs, built for linux/amd64 and linux/arm64
# on this machine without running target code. The tag both points share is one image
# index with a descriptor per platform; the per-platform tags and the matrix index list
# the manifests; skopeo (--override-arch, --raw) and umoci read them; the layout passes
# the OCI schemas; a second build from an empty store gives the same bytes; a wheel the
# index lacks for aarch64 is explained for the arm64 point at lock time; unpack and
# docker-archive take one platform; push sends the index under the shared tag; a
# platform that is not linux/amd64 or linux/arm64 is refused at its line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/apt_lib.sh"
require_tool gpg dpkg-deb gzip sha256sum

www="$TMP/www"
R="$TMP/recipe"
export GNUPGHOME="$TMP/gnupg"
mkdir -p "$GNUPGHOME" "$R" && chmod 700 "$GNUPGHOME"
gpg --batch --passphrase '' --quick-gen-key 'Fixture <fixture@example.invalid>' ed25519 sign never 2>/dev/null ||
  fail "gpg could not make a key"
gpg --batch --export >"$R/key.gpg"
mkdeb main greet 1.0 "" usr/bin/greet
DEB_ARCH=arm64 mkdeb main greet 1.0 "" usr/bin/greet usr/share/greet/arm64-only
publish main inrelease
serve_dir "$www"

echo "shared" >"$R/common.txt"
for a in amd64 arm64; do echo "built for $a" >"$R/$a.txt"; done
cat >"$R/mp.yaml" <<YAML
stack: mp
source_date_epoch: 1700000000
repositories:
  - {url: "$SERVED_URL/main", suites: [test], keyring: key.gpg}
matrix:
  platform: [linux/amd64, linux/arm64]
layers:
  - {name: base, copy: [{src: common.txt, dst: /etc/common.txt}]}
  - {name: tools, apt: [greet]}
  - {name: arch, copy: [{src: "\${arch_name}.txt", dst: /etc/arch.txt}]}
config: {env: {PLATFORM: "\${platform}"}}
tags: ["mp:1.0", "mp:1.0-\${arch_name}"]
tests:
  - {name: arch, run: "cat /etc/arch.txt", expect: "built for"}
  - {name: driver, gpu: true, run: nvidia-smi}
YAML

refs() { json "$1/index.json" '" ".join(sorted(m["annotations"]["org.opencontainers.image.ref.name"] for m in j["manifests"]))'; }
blob() { echo "$1/blobs/sha256/$2"; }

check "both platforms build into one layout: the shared tag, a tag per platform, the matrix index"
expect_ok b1 sb build "$R/mp.yaml" -o "$TMP/out" --store "$STORE"
[[ "$(refs "$TMP/out")" == "1.0 1.0-amd64 1.0-arm64 mp-matrix" ]] || fail "refs: $(refs "$TMP/out")"
grep -q "emulat" "$TMP/b1.err" && { show_output b1; fail "a build of copy and apt layers used emulation"; }
grep -Eq "linux/arm64 on this linux/amd64 machine: no layer ran linux/arm64 code \(2 built, none under QEMU\)" "$TMP/b1.err" ||
  { show_output b1; fail "the build log does not say no arm64 code ran"; }

check "the shared tag is an image index: one descriptor per platform, the per-platform manifests"
amd=$(manifest_digest "$TMP/out" 1.0-amd64)
arm=$(manifest_digest "$TMP/out" 1.0-arm64)
[[ "$amd" != "$arm" ]] || fail "the two platforms have one manifest"
python3 - "$TMP/out" "$amd" "$arm" <<'PY' || fail "the per-tag index is wrong"
import json, sys
layout, amd, arm = sys.argv[1:]
top = {m["annotations"]["org.opencontainers.image.ref.name"]: m for m in json.load(open(layout + "/index.json"))["manifests"]}
assert top["1.0"]["mediaType"] == "application/vnd.oci.image.index.v1+json", top["1.0"]
idx = json.load(open(layout + "/blobs/sha256/" + top["1.0"]["digest"][7:]))
ms = idx["manifests"]
assert [(m["platform"], m["digest"]) for m in ms] == [
    ({"os": "linux", "architecture": "amd64"}, "sha256:" + amd),
    ({"os": "linux", "architecture": "arm64"}, "sha256:" + arm)], ms
for m in ms:
    assert m["mediaType"] == "application/vnd.oci.image.manifest.v1+json", m
    man = json.load(open(layout + "/blobs/sha256/" + m["digest"][7:]))
    cfg = json.load(open(layout + "/blobs/sha256/" + man["config"]["digest"][7:]))
    assert cfg["architecture"] == m["platform"]["architecture"] and cfg["os"] == "linux", cfg
    assert "PLATFORM=linux/" + cfg["architecture"] in cfg["config"]["Env"], cfg
mx = json.load(open(layout + "/blobs/sha256/" + top["mp-matrix"]["digest"][7:]))
assert [(m["platform"]["architecture"], m["digest"]) for m in mx["manifests"]] == [
    ("amd64", "sha256:" + amd), ("arm64", "sha256:" + arm)], mx
assert [m["annotations"]["dev.stackbuild.matrix.platform"] for m in mx["manifests"]] == ["linux/amd64", "linux/arm64"], mx
PY
# The copy layer below the apt layer is the same bytes for both; the apt layer is not.
[[ "$(image_digests "$TMP/out" 1.0-amd64 | grep '^layer0 ')" == "$(image_digests "$TMP/out" 1.0-arm64 | grep '^layer0 ')" ]] ||
  fail "the shared copy layer differs between the platforms"
[[ "$(image_digests "$TMP/out" 1.0-amd64 | grep '^layer1 ')" != "$(image_digests "$TMP/out" 1.0-arm64 | grep '^layer1 ')" ]] ||
  fail "the apt layer is the same for both platforms"

check "unpack --platform takes the arm64 image from the index: arm64's .deb, dpkg status Architecture: arm64"
expect_ok u1 sb unpack --platform linux/arm64 "$TMP/out:1.0" "$TMP/arm"
[[ "$(cat "$TMP/arm/etc/arch.txt")" == "built for arm64" ]] || fail "arch.txt: $(cat "$TMP/arm/etc/arch.txt")"
[[ -f "$TMP/arm/usr/share/greet/arm64-only" ]] || fail "not the arm64 package's files"
grep -A3 '^Package: greet$' "$TMP/arm/var/lib/dpkg/status" | grep -q '^Architecture: arm64$' ||
  fail "dpkg status: $(cat "$TMP/arm/var/lib/dpkg/status")"
expect_ok u2 sb unpack "$TMP/out:1.0" "$TMP/host"
[[ "$(cat "$TMP/host/etc/arch.txt")" == "built for $(dpkg --print-architecture)" ]] || fail "without --platform: not this machine's"
expect_rc 1 u3 sb unpack --platform linux/arm64 "$TMP/out:1.0-amd64" "$TMP/wrong"
grep -q "is an image for linux/amd64, not linux/arm64" "$TMP/u3.err" || { show_output u3; fail "no platform mismatch error"; }

if [[ -f "$SCHEMAS/image-index-schema.json" ]] && python3 -c "import jsonschema" 2>/dev/null; then
  check "the layout, the per-tag and matrix indexes and every manifest pass the OCI schemas"
  expect_ok validate python3 "$HERE/validate_oci.py" "$SCHEMAS" "$TMP/out"
else
  say "the OCI schemas or python3-jsonschema are missing: the schema check is skipped"
fi

if command -v skopeo >/dev/null 2>&1; then
  check "skopeo: --raw shows the index, --override-arch arm64 the arm64 manifest"
  skopeo inspect --raw "oci:$TMP/out:1.0" >"$TMP/raw.json" || fail "skopeo inspect --raw"
  cmp "$TMP/raw.json" "$(blob "$TMP/out" "$(manifest_digest "$TMP/out" 1.0)")" || fail "skopeo's raw index differs"
  # Its Digest is the index's; the layers and architecture are the chosen image's.
  layers_of() { json "$(blob "$TMP/out" "$1")" '"[" + " ".join(l["digest"] for l in j["layers"]) + "]"'; }
  got=$(skopeo inspect --override-arch arm64 --format '{{.Architecture}} {{.Layers}}' "oci:$TMP/out:1.0")
  [[ "$got" == "arm64 $(layers_of "$arm")" ]] || fail "skopeo --override-arch arm64: $got"
  got=$(skopeo inspect --override-arch amd64 --format '{{.Architecture}} {{.Layers}}' "oci:$TMP/out:1.0")
  [[ "$got" == "amd64 $(layers_of "$amd")" ]] || fail "skopeo --override-arch amd64: $got"
else
  say "skopeo is not installed: its checks are skipped"
fi
if command -v umoci >/dev/null 2>&1; then
  check "umoci unpacks the arm64 image"
  umoci unpack --rootless --image "$TMP/out:1.0-arm64" "$TMP/umoci" >/dev/null 2>"$TMP/umoci.err" ||
    fail "umoci: $(cat "$TMP/umoci.err")"
  [[ "$(cat "$TMP/umoci/rootfs/etc/arch.txt")" == "built for arm64" ]] || fail "umoci's arm64 rootfs"
  [[ "$(json "$TMP/umoci/config.json" 'j["process"]["env"]')" == *"PLATFORM=linux/arm64"* ]] || fail "umoci's config"
fi

check "with only the shared tag, the layout still holds every platform's blobs (no ref names them)"
sed 's|^tags: .*|tags: ["mp:1.0"]|' "$R/mp.yaml" >"$R/one-tag.yaml"
expect_ok b4 sb build "$R/one-tag.yaml" -o "$TMP/one" --store "$STORE"
[[ "$(refs "$TMP/one")" == "1.0 mp-matrix" ]] || fail "refs: $(refs "$TMP/one")"
verify_blobs "$TMP/one"
for a in amd64 arm64; do
  expect_ok u5 sb unpack --platform "linux/$a" "$TMP/one:1.0" "$TMP/one-$a"
  [[ "$(cat "$TMP/one-$a/etc/arch.txt")" == "built for $a" ]] || fail "one tag: the $a image"
done
if [[ -f "$SCHEMAS/image-index-schema.json" ]] && python3 -c "import jsonschema" 2>/dev/null; then
  expect_ok validate1 python3 "$HERE/validate_oci.py" "$SCHEMAS" "$TMP/one"
fi

check "a second build from an empty store, elsewhere and later, gives the same bytes"
mkdir -p "$TMP/elsewhere" && cp -r "$R" "$TMP/elsewhere/r"
sleep 1
expect_ok b2 sb build "$TMP/elsewhere/r/mp.yaml" -o "$TMP/out2" --store "$TMP/store2"
cmp "$TMP/out/index.json" "$TMP/out2/index.json" || fail "another index.json"
diff <(cd "$TMP/out/blobs/sha256" && ls) <(cd "$TMP/out2/blobs/sha256" && ls) || fail "other blobs"

check "--platform builds one platform; docker-archive takes one platform"
expect_ok b3 sb build "$R/mp.yaml" -o "$TMP/out3" --store "$STORE" --platform linux/arm64
[[ "$(refs "$TMP/out3")" == "1.0 1.0-arm64 mp-matrix" ]] || fail "--platform linux/arm64 wrote: $(refs "$TMP/out3")"
[[ "$(manifest_digest "$TMP/out3" 1.0)" == "$arm" ]] || fail "one platform: the shared tag is not its manifest"
expect_rc 2 d1 sb build "$R/mp.yaml" --format docker-archive -o "$TMP/mp.tar" --store "$STORE"
grep -q "docker-archive holds images of one platform.*choose one with --platform" "$TMP/d1.err" || { show_output d1; fail "no one-platform error"; }
[[ ! -e "$TMP/mp.tar" ]] || fail "a refused docker-archive was written"
expect_ok d2 sb build "$R/mp.yaml" --format docker-archive -o "$TMP/mp.tar" --store "$STORE" --platform linux/arm64
mkdir "$TMP/tar" && tar -xf "$TMP/mp.tar" -C "$TMP/tar"
[[ "$(json "$TMP/tar/$(json "$TMP/tar/manifest.json" 'j[0]["Config"]')" 'j["architecture"]')" == arm64 ]] ||
  fail "the docker-archive is not the arm64 image"

check "a platform other than linux/amd64 or linux/arm64 is refused at its line, before anything is built"
for bad in linux/riscv64 'linux/arm64;touch /tmp/x' ../../etc/passwd windows/amd64; do
  sed "s|  platform: \[linux/amd64, linux/arm64\]|  platform: [linux/amd64, \"$bad\"]|" "$R/mp.yaml" >"$R/bad.yaml"
  expect_rc 3 bad sb build "$R/bad.yaml" -o "$TMP/bad" --store "$STORE"
  grep -qF "bad.yaml:6:" "$TMP/bad.err" && grep -qF "matrix.platform '$bad' is not a platform stackbuild builds for" "$TMP/bad.err" ||
    { show_output bad; fail "'$bad' is not refused at its line"; }
  [[ ! -e "$TMP/bad" ]] || fail "a refused recipe wrote output"
done
expect_rc 2 bad2 sb build "$R/mp.yaml" -o "$TMP/bad" --store "$STORE" --platform linux/ppc64le
grep -q "not a platform stackbuild builds for" "$TMP/bad2.err" || { show_output bad2; fail "--platform linux/ppc64le accepted"; }

if grep -qs '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
  say "binfmt_misc has qemu-aarch64 with the F flag here: the checks of its absence are skipped"
else
  # No interpreter for the sandbox to register either (test_emulation.sh runs with one).
  mkdir -p "$TMP/no-qemu"
  export STACKBUILD_QEMU_DIR="$TMP/no-qemu"
  check "stackbuild test of the arm64 image without QEMU: its tests are skipped, naming what to install; GPU tests skipped"
  expect_ok t1 sb test "$TMP/out:1.0-arm64" --store "$STORE" --report "$TMP/t1.json"
  python3 - "$TMP/t1.json" <<'PY' || { show_output t1; fail "the arm64 image's tests were not skipped as they should be"; }
import json, sys
def results(j):  # every object with a name and an outcome, wherever the report keeps them
    if isinstance(j, dict):
        if "name" in j and "outcome" in j:
            yield j
        for v in j.values():
            yield from results(v)
    elif isinstance(j, list):
        for v in j:
            yield from results(v)
rs = {r["name"]: r for r in results(json.load(open(sys.argv[1])))}
arch = rs["recipe: arch"]
assert arch["outcome"] == "skipped" and "linux/arm64 code needs QEMU user emulation" in arch["message"] \
    and "install Debian's qemu-user-static" in arch["message"], arch
drv = rs["recipe: driver"]
assert drv["outcome"] == "skipped" and "linux/arm64 image on this linux/amd64 machine" in drv["message"], drv
PY

  check "stackbuild test RECIPE --only platform=linux/arm64 tests that point's image, not the shared tag's amd64 one"
  expect_ok t2 sb test "$R/mp.yaml" -o "$TMP/out" --store "$STORE" --only platform=linux/arm64
  grep -q "^skipped *recipe: arch .*linux/arm64 code needs QEMU user emulation" "$TMP/t2.out" || { show_output t2; fail "not the arm64 image"; }
  expect_rc 1 t3 sb test "$TMP/out:1.0" --store "$STORE" --platform linux/amd64
  grep -q "^failed *recipe: arch" "$TMP/t3.out" || { show_output t3; fail "--platform linux/amd64 did not test the amd64 image (no shell: its test fails)"; }

  check "build steps of linux/arm64 without QEMU: a clear error naming what to install, nothing written"
  cat >"$R/steps.yaml" <<'YAML'
stack: st
matrix:
  platform: [linux/arm64]
layers:
  - {name: base, copy: [{src: common.txt, dst: /etc/common.txt}]}
  - {name: step, build: {run: ["/bin/true"]}}
tags: ["st:1"]
YAML
  expect_rc 1 steps sb build "$R/steps.yaml" -o "$TMP/steps" --store "$STORE"
  grep -q "layer 'step': linux/arm64 code needs QEMU user emulation on this linux/amd64 machine, and binfmt_misc has no /proc/sys/fs/binfmt_misc/qemu-aarch64, and there is no $TMP/no-qemu/qemu-aarch64-static for the sandbox to register; install Debian's qemu-user-static" "$TMP/steps.err" ||
    { show_output steps; fail "no emulation error"; }
  [[ ! -e "$TMP/steps/index.json" ]] || fail "a refused build wrote an image"
  unset STACKBUILD_QEMU_DIR
fi

check "a wheel the index has only for x86_64: lock explains the arm64 point, naming the wheel and aarch64"
mkdir -p "$www/pypi/simple/fastlib" "$www/pypi/files" "$TMP/w"
python3 - "$www/pypi" <<'PY'
import hashlib, sys, zipfile
out, fn = sys.argv[1], "fastlib-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
with zipfile.ZipFile(f"{out}/files/{fn}", "w") as z:
    z.writestr("fastlib/__init__.py", "")
    z.writestr("fastlib-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fastlib\nVersion: 1.0\n")
    z.writestr("fastlib-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_17_x86_64\n")
    z.writestr("fastlib-1.0.dist-info/RECORD", "")
h = hashlib.sha256(open(f"{out}/files/{fn}", "rb").read()).hexdigest()
open(f"{out}/simple/fastlib/index.html", "w").write(f'<a href="../../files/{fn}#sha256={h}">{fn}</a>')
PY
echo hi >"$TMP/w/a"
cat >"$TMP/w/w.yaml" <<'YAML'
stack: w
platform: {python: "3.11", glibc: "2.36"}
matrix:
  platform: [linux/amd64, linux/arm64]
layers:
  - {name: base, copy: [{src: a, dst: /etc/a}]}
  - {name: wheels, pip: [fastlib]}
tags: ["w:1"]
YAML
PIP_INDEX_URL="$SERVED_URL/pypi/simple" PIP_CONFIG_FILE=/dev/null expect_rc 1 lockw sb lock "$TMP/w/w.yaml" --store "$STORE"
grep -q "no wheel of fastlib for CPython 3.11, manylinux glibc 2.36, aarch64 (the index has 1 files of it for other platforms" "$TMP/lockw.err" &&
  grep -q "while locking what the layers of point platform=linux/arm64 fetch" "$TMP/lockw.err" ||
  { show_output lockw; fail "the missing aarch64 wheel is not explained"; }
[[ ! -e "$TMP/w/w.yaml.lock" ]] || fail "a failed lock wrote a lockfile"

source "$HERE/registry/lib.sh"
if command -v docker-registry >/dev/null 2>&1 && command -v skopeo >/dev/null 2>&1; then
  check "build --push-to sends the index under the shared tag, the layout's bytes"
  start_registry plain
  REG="127.0.0.1:$REG_PORT"
  expect_ok p1 sb build "$R/mp.yaml" -o "$TMP/out4" --store "$STORE" --push-to "$REG/team/mp" --no-verify
  skopeo inspect --tls-verify=false --raw "docker://$REG/team/mp:1.0" >"$TMP/pushed.json" || fail "no index under 1.0"
  cmp "$TMP/pushed.json" "$(blob "$TMP/out" "$(manifest_digest "$TMP/out" 1.0)")" || fail "the pushed index differs from the layout's"
  [[ "$(skopeo inspect --tls-verify=false --override-arch arm64 --format '{{.Architecture}} {{.Layers}}' "docker://$REG/team/mp:1.0")" == "arm64 $(layers_of "$arm")" ]] ||
    fail "the registry's arm64 image"
  check "push --platform linux/arm64 of the shared tag pushes the arm64 image alone"
  expect_ok pp sb push "$TMP/out:1.0" "$REG/single/mp:arm" --platform linux/arm64 --store "$STORE"
  skopeo inspect --tls-verify=false --raw "docker://$REG/single/mp:arm" >"$TMP/single.json" || fail "nothing under :arm"
  cmp "$TMP/single.json" "$(blob "$TMP/out" "$arm")" || fail "push --platform did not push the layout's arm64 manifest"
  expect_rc 1 ppbad sb push "$TMP/out:1.0" "$REG/single/mp:x" --platform linux/ppc64le --store "$STORE"
  grep -q "ppc64le" "$TMP/ppbad.err" || { show_output ppbad; fail "no clear error for a platform the index lacks"; }
  check "pull --platform linux/arm64 takes the arm64 image from the registry's index"
  expect_ok pl sb pull --platform linux/arm64 "$REG/team/mp:1.0" "$TMP/pulled" --store "$STORE" --insecure-registry "$REG"
  expect_ok u4 sb unpack "$TMP/pulled" "$TMP/pulled-root"
  [[ "$(cat "$TMP/pulled-root/etc/arch.txt")" == "built for arm64" ]] || fail "pull --platform took another image"

  check "a fan-out (a task per platform, as 'stackbuild cluster' runs them) and merge give the shared tag's index and the matrix index one machine pushes"
  printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REG" >"$TMP/registries.conf"
  export CONTAINERS_REGISTRIES_CONF="$TMP/registries.conf"
  expect_ok lockmp sb lock "$R/mp.yaml" --store "$STORE"
  for p in amd64 arm64; do
    expect_ok "task_$p" sb build "$R/mp.yaml" --locked --only "platform=linux/$p" --no-index --record-inputs \
      --push-to "$REG/fan/mp" --store "$TMP/task-$p" --no-verify
  done
  grep -q "shared tag 1.0: pushed as 1.0-arm64" "$TMP/task_arm64.err" || { show_output task_arm64; fail "the task did not say where it pushed"; }
  expect_ok merge sb merge "$R/mp.yaml" --locked --registry "$REG/fan/mp" --store "$STORE"
  for t in 1.0 1.0-amd64 1.0-arm64 mp-matrix; do
    a=$(skopeo inspect --tls-verify=false --raw "docker://$REG/team/mp:$t" | sha256sum)
    b=$(skopeo inspect --tls-verify=false --raw "docker://$REG/fan/mp:$t" | sha256sum)
    [[ $a == "$b" ]] || { show_output merge; fail "the merged $t differs from one machine's push"; }
  done
  unset CONTAINERS_REGISTRIES_CONF
else
  say "docker-registry or skopeo is not installed: the push checks are skipped"
fi
pass
