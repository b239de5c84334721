#!/usr/bin/env bash
# The estargz library of containerd's stargz snapshotter (Debian's
# golang-github-containerd-stargz-snapshotter-dev, built offline with Debian's
# Go) opens what `stackbuild layer` writes, as a lazy-pulling client would
# (tests/tools/estargz-check): the footer, the TOC checked against the layer's
# annotations, every chunk of every file against its digest, every file against
# the input tree, and a big file read by ranges. eStargz, and zstd:chunked
# through the library's zstdchunked decompressor. A blob with one byte changed
# and a wrong TOC digest must fail the checker.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool go
GOSRC=/usr/share/gocode/src/github.com
[[ -f $GOSRC/containerd/stargz-snapshotter/estargz/estargz.go ]] ||
  skip "the estargz library is not installed (golang-github-containerd-stargz-snapshotter-dev)"
cd "$TMP"

check "build the checker offline with Debian's Go and packaged sources"
cp -r "$SB_SOURCE_DIR/tests/tools/estargz-check" checker-src
expect_ok go-build in_dir checker-src env GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$TMP/gocache" \
  GOFLAGS= GOPROXY=off go build -o "$TMP/estargz-check" .

EPOCH=1704067200
(umask 022 && make_tree in/tree --big 9)
field() { python3 -c 'import json,sys; print(eval(sys.argv[2], {}, {"j": json.load(open(sys.argv[1]))}))' "$1" "$2"; }

for comp in estargz zstd:chunked; do
  name=${comp/:/-}
  expect_ok "layer-$name" sb layer in/tree --store "$STORE" --compression "$comp" --source-date-epoch "$EPOCH" -o "$TMP/$name.blob"
  cp "$TMP/layer-$name.out" "$name.json"
done
toc=$(field estargz.json 'j["annotations"]["containerd.io/snapshot/stargz/toc.digest"]')
sum=$(field zstd-chunked.json 'j["annotations"]["io.containers.zstd-chunked.manifest-checksum"]')
pos=$(field zstd-chunked.json 'j["annotations"]["io.containers.zstd-chunked.manifest-position"]')

check "the library verifies the eStargz layer and reads its files"
expect_ok check-estargz ./estargz-check -blob estargz.blob -toc-digest "$toc" -tree in/tree -read big/data.bin
cat check-estargz.out
grep -q "chunks verified" check-estargz.out || fail "the checker did not report its checks"

check "the library verifies the zstd:chunked layer and reads its files"
expect_ok check-chunked ./estargz-check -zstd-chunked -blob zstd-chunked.blob -manifest-checksum "$sum" \
  -manifest-position "$pos" -tree in/tree -read big/data.bin
cat check-chunked.out

check "a changed byte or a wrong TOC digest fails the checker"
python3 - estargz.blob bad.blob <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0x55   # inside big/data.bin's chunks
open(sys.argv[2], "wb").write(b)
PY
expect_rc 1 check-bad ./estargz-check -blob bad.blob -toc-digest "$toc" -tree in/tree
expect_rc 1 check-wrong-toc ./estargz-check -blob estargz.blob -toc-digest "sha256:$(printf x | sha256sum | cut -c1-64)"
grep -q "invalid TOC JSON" check-wrong-toc.err || fail "a wrong TOC digest failed for another reason: $(cat check-wrong-toc.err)"
expect_rc 1 check-wrong-sum ./estargz-check -zstd-chunked -blob zstd-chunked.blob \
  -manifest-checksum "sha256:$(printf x | sha256sum | cut -c1-64)" -manifest-position "$pos"
pass
