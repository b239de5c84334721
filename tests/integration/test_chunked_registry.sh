#!/usr/bin/env bash
# Chunked layers through a real registry (distribution, plain HTTP on 127.0.0.1):
# a recipe whose layers choose their own compression (`compression: estargz`,
# `compression: zstd:chunked`, the rest gzip) is pushed by stackbuild; the
# registry's manifest (skopeo inspect --raw) carries each layer's media type and
# its format's annotations; stackbuild pulls it into an empty store as the same
# manifest digest, and unpacks it to the tree of the all-gzip build.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo
cd "$TMP"

EPOCH=1704067200
(umask 022 && make_tree in/tree)
cat >in/mixed.yaml <<YAML
stack: mixed
source_date_epoch: $EPOCH
layers:
  - name: lazy
    compression: estargz
    copy:
      - {src: tree/, dst: /opt/lazy/}
  - name: partial
    compression: zstd:chunked
    copy:
      - {src: tree/, dst: /opt/partial/}
  - name: plain
    copy:
      - {src: tree/README, dst: /etc/readme}
tags: ["mixed:1.0"]
YAML
sed '/compression:/d' in/mixed.yaml >in/gzip.yaml

check "per-layer compression: the manifest's layers are estargz, zstd:chunked and gzip"
expect_ok build sb build in/mixed.yaml -o "$TMP/img" --store "$STORE"
expect_ok build-gzip sb build in/gzip.yaml -o "$TMP/img-gzip" --store "$STORE"
m=$(manifest_digest img 1.0)
types=$(json "img/blobs/sha256/$m" '" ".join(l["mediaType"].rsplit(".", 1)[1] for l in j["layers"])')
[[ "$types" == "tar+gzip tar+zstd tar+gzip" ]] || fail "layer media types: $types"

start_registry plain
R="127.0.0.1:$REG_PORT"
check "push: the registry's manifest keeps the layers' annotations"
expect_ok push sb push img:1.0 "$R/mixed:1.0" --store "$STORE"
skopeo inspect --tls-verify=false --raw "docker://$R/mixed:1.0" >raw.json
[[ "$(json raw.json 'sorted(j["layers"][0].get("annotations", {}))')" == \
   "['containerd.io/snapshot/stargz/toc.digest', 'io.containers.estargz.uncompressed-size']" ]] ||
  fail "the estargz layer's annotations: $(json raw.json 'j["layers"][0]')"
[[ "$(json raw.json 'sorted(j["layers"][1].get("annotations", {}))')" == \
   "['io.containers.zstd-chunked.manifest-checksum', 'io.containers.zstd-chunked.manifest-position']" ]] ||
  fail "the zstd:chunked layer's annotations: $(json raw.json 'j["layers"][1]')"
[[ "$(json raw.json '"annotations" in j["layers"][2]')" == False ]] || fail "the gzip layer has annotations"

check "pull into an empty store: the same manifest, and unpack gives the gzip build's tree"
expect_ok pull sb pull "$R/mixed:1.0" "$TMP/back:1.0" --store "$TMP/store2"
[[ "$(manifest_digest back 1.0)" == "$m" ]] || fail "the pulled manifest differs from the pushed one"
expect_ok unpack sb unpack back:1.0 "$TMP/out" --store "$TMP/store2"
expect_ok unpack-gzip sb unpack img-gzip:1.0 "$TMP/out-gzip" --store "$STORE"
expect_ok cmp python3 "$HERE/treecmp.py" out-gzip out --clamp "$EPOCH"
pass
