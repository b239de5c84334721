#!/usr/bin/env bash
# `stackbuild unpack` gives the same tree as umoci (the reference implementation of
# OCI unpacking) for a rich image, with or without a ref, from gzip and zstd layouts;
# `stackbuild extract` of the layer blobs gives it too. Unpacking onto an existing
# directory is refused (exit 2) and leaves it alone; a layout with a corrupted layer
# blob is refused with a digest error and leaves no output and no temp dir, also when
# the blob is a valid layer (unpack extracts while it hashes: what it extracted before
# the mismatch shows must go too), and when a swapped-in blob of the same size is a
# hostile layer (the digest error is reported, and nothing lands outside the target).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool umoci
cd "$TMP"

EPOCH=1704067200
check "build a rich recipe (gzip and zstd) and unpack it with umoci"
(umask 022 && make_tree in/tree)
printf 'key\n' >in/secret.key
find in -exec touch -h -d '2025-05-05 05:05:05 UTC' {} +
cat >in/rich.yaml <<YAML
stack: rich
source_date_epoch: $EPOCH
layers:
  - name: tree
    copy:
      - {src: tree/, dst: /opt/app/}
  - name: secret
    copy:
      - {src: secret.key, dst: /etc/app/secret.key, mode: "0600"}
tags: ["rich:1.0"]
YAML
expect_ok build sb build in/rich.yaml -o "$TMP/img" --store "$STORE"
expect_ok build-zstd sb build in/rich.yaml -o "$TMP/img-zstd" --compression zstd --store "$STORE"
expect_ok umoci umoci unpack --rootless --image img:1.0 "$TMP/bundle"
REF=bundle/rootfs
# umoci's tree is the reference only if it is right: check it against the recipe too.
mkdir -p exp/opt exp/etc/app
expected_copy in/tree exp/opt/app
cp -a in/secret.key exp/etc/app/secret.key && chmod 0600 exp/etc/app/secret.key
find exp -type d -exec chmod 0755 {} +
expect_ok cmp-umoci python3 "$HERE/treecmp.py" exp "$REF" --clamp "$EPOCH"

check "stackbuild unpack img:1.0 OUT gives umoci's tree"
expect_ok unpack sb unpack img:1.0 "$TMP/out" --store "$STORE"
[[ -d out ]] || fail "unpack exited 0 but made no $TMP/out"
expect_ok cmp-unpack python3 "$HERE/treecmp.py" "$REF" out --clamp "$EPOCH"
cat "$TMP/cmp-unpack.out"

check "the ref is optional when the layout holds one image"
expect_ok unpack-noref sb unpack img "$TMP/out-noref" --store "$STORE"
expect_ok cmp-noref python3 "$HERE/treecmp.py" "$REF" out-noref --clamp "$EPOCH"

check "unpacking the zstd layout gives the same tree"
expect_ok unpack-zstd sb unpack img-zstd:1.0 "$TMP/out-zstd" --store "$STORE"
expect_ok cmp-zstd python3 "$HERE/treecmp.py" "$REF" out-zstd --clamp "$EPOCH"

check "stackbuild extract DIR LAYER... of the image's layer blobs, in order, gives the same tree"
m=$(manifest_digest img 1.0)
mapfile -t blobs < <(json "img/blobs/sha256/$m" '"\n".join("img/blobs/sha256/" + l["digest"][7:] for l in j["layers"])')
[[ ${#blobs[@]} -eq 2 ]] || fail "expected 2 layer blobs, got ${#blobs[@]}"
expect_ok extract sb extract "$TMP/out-extract" "${blobs[@]}" --store "$STORE"
expect_ok cmp-extract python3 "$HERE/treecmp.py" "$REF" out-extract --clamp "$EPOCH"

check "unpack onto an existing directory: exit 2, the directory is left alone"
mkdir existing && printf 'mine\n' >existing/keep
expect_rc 2 unpack-existing sb unpack img:1.0 "$TMP/existing" --store "$STORE"
[[ "$(ls -A existing)" == keep && "$(cat existing/keep)" == mine ]] || fail "unpack touched the existing directory"

check "unpack of a ref the layout does not have: an error naming the refs it has, no output"
run_capture unpack-noimage sb unpack img:nope "$TMP/out-nope" --store "$STORE"
[[ $RC -ne 0 ]] || fail "unpack of a missing ref exited 0"
grep -q "1.0" "$TMP/unpack-noimage.err" || { show_output unpack-noimage; fail "the error does not list the refs the layout has"; }
[[ ! -e out-nope ]] || fail "a failed unpack left out-nope"

check "a layout with a corrupted layer blob: a digest error, exit 1, no output, no temp dir"
cp -a img corrupt
victim=corrupt/${blobs[0]#img/}
python3 - "$victim" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x01                       # one bit, in the middle of the blob
open(p, "wb").write(b)
PY
cmp -s "${blobs[0]}" "$victim" && fail "the blob was not changed"
mkdir parent
expect_rc 1 unpack-corrupt sb unpack corrupt:1.0 "$TMP/parent/out" --store "$STORE"
grep -qiE 'digest|sha256|mismatch' "$TMP/unpack-corrupt.err" || { show_output unpack-corrupt; fail "the error does not mention the digest"; }
grep -q "${victim##*/}" "$TMP/unpack-corrupt.err" || { show_output unpack-corrupt; fail "the error does not name the corrupt blob"; }
[[ -z "$(ls -A parent)" ]] || fail "a failed unpack left something in parent/: $(ls -A parent)"

check "a layout with a corrupted config blob is refused too"
cp -a img corrupt-config
c=$(json "img/blobs/sha256/$m" 'j["config"]["digest"][7:]')
printf ' ' >>"corrupt-config/blobs/sha256/$c"
expect_rc 1 unpack-corrupt-config sb unpack corrupt-config:1.0 "$TMP/parent/out2" --store "$STORE"
grep -qiE 'digest|sha256|mismatch' "$TMP/unpack-corrupt-config.err" || { show_output unpack-corrupt-config; fail "the error does not mention the digest"; }
[[ -z "$(ls -A parent)" ]] || fail "a failed unpack left something in parent/: $(ls -A parent)"

check "an uncompressed layer whose file content was changed: still a valid tar, refused by its digest"
expect_ok build-none sb build in/rich.yaml -o "$TMP/img-none" --compression none --store "$STORE"
mn=$(manifest_digest img-none 1.0)
mapfile -t nblobs < <(json "img-none/blobs/sha256/$mn" '"\n".join("img-none/blobs/sha256/" + l["digest"][7:] for l in j["layers"])')
python3 - "${nblobs[0]}" <<'PY'
import sys, tarfile
p = sys.argv[1]
with tarfile.open(p) as t:                      # the first regular file with content
    m = next(m for m in t.getmembers() if m.isfile() and m.size > 0)
b = bytearray(open(p, "rb").read())
b[m.offset_data] ^= 0x01                      # its first byte; headers and checksums untouched
open(p, "wb").write(b)
PY
tar -tf "${nblobs[0]}" >/dev/null || fail "the changed blob is no longer a valid tar: the test tests nothing"
mkdir parent-none
expect_rc 1 unpack-changed sb unpack img-none:1.0 "$TMP/parent-none/out" --store "$STORE"
grep -qiE 'digest' "$TMP/unpack-changed.err" || { show_output unpack-changed; fail "the error does not mention the digest"; }
grep -q "$(basename "${nblobs[0]}")" "$TMP/unpack-changed.err" || { show_output unpack-changed; fail "the error does not name the blob"; }
[[ -z "$(ls -A parent-none)" ]] || fail "a refused unpack left something in parent-none/: $(ls -A parent-none)"

check "a hostile layer swapped in at the same size: the digest error, nothing outside the target"
python3 - "${nblobs[0]}" <<'PY'
import io, os, sys, tarfile
p = sys.argv[1]
size = os.path.getsize(p)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
    for name, data in (("../../escaped-by-dots", b"x"), ("opt/evil", b"y")):
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
    l = tarfile.TarInfo("opt/out"); l.type = tarfile.SYMTYPE; l.linkname = "/../../.."; t.addfile(l)
    i = tarfile.TarInfo("opt/out/escaped-by-link"); i.size = 1; t.addfile(i, io.BytesIO(b"z"))
b = buf.getvalue()
assert len(b) <= size, (len(b), size)
open(p, "wb").write(b + b"\0" * (size - len(b)))   # zero blocks: the tar's end, then padding
PY
mkdir -p deep/er parent-hostile
expect_rc 1 unpack-hostile sb unpack img-none:1.0 "$TMP/deep/er/parent-hostile/out" --store "$STORE"
grep -qiE 'digest' "$TMP/unpack-hostile.err" || { show_output unpack-hostile; fail "the error is not the digest's"; }
[[ ! -e deep/escaped-by-dots && ! -e escaped-by-dots && ! -e /escaped-by-link ]] || fail "the hostile layer wrote outside"
[[ -z "$(find deep -mindepth 2 -not -path deep/er/parent-hostile)" ]] || fail "a refused unpack left: $(find deep -mindepth 2)"

pass
