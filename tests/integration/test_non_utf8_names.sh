#!/usr/bin/env bash
# File names that are not UTF-8. Paths on Linux are bytes, and a base image
# from elsewhere may hold Latin-1 names. A base layout written by another
# tool (Python's tarfile, GNU format: names as raw bytes) holds a static
# busybox, a directory and a dynamic ELF file with such names, a symlink and
# a hardlink to it, and a file a step deletes. Then:
#   - `stackbuild test` of it fails the libraries check naming the file as
#     `t\xFFx`; the JSON and JUnit reports parse, and so does every line of
#     --progress json;
#   - a recipe `from:` that layout with a copy layer of a host tree with such
#     a name and a build step that deletes one and makes another builds; a
#     second store builds the same digests;
#   - `stackbuild unpack` and `umoci unpack` of the result give the same
#     tree, with the bytes as they were and the deleted file gone.
# Runs as root (the build step's sandbox); skipped otherwise.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool umoci
cd "$TMP"

# The base layout, written by Python: nothing of stackbuild's made its layer.
python3 - base <<'PY'
import gzip, hashlib, io, json, os, sys, tarfile
out = sys.argv[1]
os.makedirs(out + "/blobs/sha256")
def blob(b):
    d = hashlib.sha256(b).hexdigest()
    open(f"{out}/blobs/sha256/{d}", "wb").write(b)
    return {"digest": "sha256:" + d, "size": len(b)}
def add(t, name, kind=tarfile.REGTYPE, data=b"", link="", mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname, ti.mode, ti.mtime = kind, link, mode, 1000
    ti.size = len(data) if kind == tarfile.REGTYPE else 0
    t.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
buf = io.BytesIO()
# surrogateescape: "\udcff" is the byte 0xFF, written as it is.
with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape") as t:
    for d in ["bin", "lat\udce9n"]:
        add(t, d, tarfile.DIRTYPE, mode=0o755)
    add(t, "bin/busybox", data=open("/bin/busybox", "rb").read(), mode=0o755)
    add(t, "bin/sh", tarfile.SYMTYPE, link="busybox")
    add(t, "lat\udce9n/t\udcffx", data=open("/bin/true", "rb").read(), mode=0o755)
    add(t, "lat\udce9n/sym", tarfile.SYMTYPE, link="t\udcffx")
    add(t, "lat\udce9n/hard", tarfile.LNKTYPE, link="lat\udce9n/t\udcffx")
    add(t, "lat\udce9n/gone\udcfe", data=b"deleted by the step\n")
raw = buf.getvalue()
layer = blob(gzip.compress(raw, mtime=0))
config = blob(json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/bin"]},
                          "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}}).encode())
manifest = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer}]}).encode())
json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", **manifest,
           "annotations": {"org.opencontainers.image.ref.name": "1"}}]}, open(out + "/index.json", "w"))
open(out + "/oci-layout", "w").write('{"imageLayoutVersion": "1.0.0"}')
PY

check "stackbuild test names the file that is not UTF-8 as \\xFF, and the reports parse"
run_capture test "$SB" test base:1 --store "$STORE" --report report.json --junit junit.xml --progress plain
[[ $RC == 1 ]] || { show_output test; fail "test of the base exited $RC, expected 1 (a library is missing)"; }
grep -Fq '/lat\xE9n/t\xFFx: needs libc.so.6' "$TMP/test.out" || { show_output test; fail "the table does not name /lat\\xE9n/t\\xFFx"; }
python3 - <<'PY' || fail "the JSON or JUnit report is wrong"
import json, xml.etree.ElementTree as ET
r = json.load(open("report.json"))
libs = [t for t in r["results"] if t["name"] == "static: libraries resolve"][0]
assert libs["outcome"] == "failed", libs
assert any(d.startswith("/lat\\xE9n/t\\xFFx: needs libc.so.6") for d in libs["details"]), libs
assert any("\\xFFx" in (f.text or "") for f in ET.parse("junit.xml").getroot().iter("failure"))
PY
run_capture test-json "$SB" test base:1 --store "$STORE" --progress json
[[ $RC == 1 ]] || { show_output test-json; fail "test --progress json exited $RC, expected 1"; }
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]' "$TMP/test-json.err" ||
  { show_output test-json; fail "a --progress json line is not JSON"; }

mkdir -p tree
printf 'host\n' >"tree/h$(printf '\xe4')st"
cat >recipe.yaml <<'EOF'
stack: names
from: oci:base:1
layers:
  - name: host
    copy:
      - {src: tree/, dst: /host/}
  - name: step
    build:
      run:
        - 'rm /lat*/gone* && echo made > "$(echo /lat*)/new$(printf "\375")"'
tags: ["names:1"]
EOF

check "a recipe from that base, with such names in a copy layer and a step, builds"
expect_ok build sb build recipe.yaml -o out --store "$STORE"
expect_ok build2 sb build recipe.yaml -o out2 --store "$TMP/store2"
cmp out/index.json out2/index.json || fail "another store built other digests"

check "stackbuild unpack and umoci unpack give the same tree, bytes as they were"
expect_ok unpack sb unpack out:1 mine --store "$STORE"
expect_ok umoci umoci unpack --rootless --image out:1 bundle
python3 "$HERE/treecmp.py" mine bundle/rootfs --ignore etc || fail "stackbuild unpack and umoci unpack differ"
python3 - <<'PY' || fail "the unpacked tree is wrong"
import os
d = b"mine/lat\xe9n"
assert open(d + b"/t\xffx", "rb").read() == open("/bin/true", "rb").read()
assert os.readlink(d + b"/sym") == b"t\xffx"
assert os.stat(d + b"/hard").st_ino == os.stat(d + b"/t\xffx").st_ino
assert not os.path.lexists(d + b"/gone\xfe"), "the step deleted it"
assert open(d + b"/new\xfd", "rb").read() == b"made\n"
assert open(b"mine/host/h\xe4st", "rb").read() == b"host\n"
PY
pass
