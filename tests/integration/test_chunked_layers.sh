#!/usr/bin/env bash
# eStargz and zstd:chunked layers (docs/layers.md) are deterministic and stay
# ordinary layers to tools that do not know them:
#   - `stackbuild layer` of a rich tree (make_tree.py, plus 9 MiB so that a file
#     spans several chunks) with -j 1, 2 and 16, each from an empty store in its
#     own directory, gives one digest a format;
#   - `gzip -dc` / `zstd -dc` of the blob is a tar that `tar -t` lists: the gzip
#     layer's entries (eStargz adds its landmark first and its TOC last), and for
#     zstd:chunked exactly the gzip layer's tar (the same diff_id);
#   - images built with --compression estargz and zstd:chunked carry the formats'
#     annotations on their layer descriptors; `stackbuild unpack` gives the gzip
#     image's tree (eStargz's own entries left out, as its clients do, but a file
#     of that name in a plain gzip layer is unpacked); skopeo copies the layouts
#     (oci: to oci:) keeping the annotations; umoci unpacks the eStargz copy to the
#     same tree (plus eStargz's two entries, which umoci does not know to skip;
#     Debian's umoci reads no zstd layer, plain or chunked), and stackbuild unpack
#     both copies.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool gzip zstd tar skopeo umoci sha256sum
cd "$TMP"

EPOCH=1704067200
(umask 022 && make_tree in/tree --big 9)
find in -exec touch -h -d '2025-05-05 05:05:05 UTC' {} +

field() { python3 -c 'import json,sys; print(eval(sys.argv[2], {}, {"j": json.load(open(sys.argv[1]))}))' "$1" "$2"; }

check "the same layer digest with -j 1, 2 and 16, each from an empty store"
for comp in gzip estargz zstd:chunked; do
  name=${comp/:/-}
  for j in 1 2 16; do
    mkdir -p "run-$name-$j"
    expect_ok "layer-$name-$j" in_dir "run-$name-$j" "$SB" layer "$TMP/in/tree" --store "$TMP/run-$name-$j/store" \
      --compression "$comp" -j "$j" --source-date-epoch "$EPOCH" -o "$TMP/$name-$j.blob" --progress plain
    cp "$TMP/layer-$name-$j.out" "$name-$j.json"
  done
  d1=$(field "$name-1.json" 'j["digest"]')
  for j in 2 16; do
    dj=$(field "$name-$j.json" 'j["digest"]')
    [[ "$dj" == "$d1" ]] || fail "$comp: -j $j gives $dj, -j 1 gives $d1"
    cmp -s "$name-1.blob" "$name-$j.blob" || fail "$comp: the blobs of -j 1 and -j $j differ"
  done
  say "$comp: $d1 ($(stat -c %s "$name-1.blob") bytes)"
done
[[ "$(field estargz-1.json 'j["media_type"]')" == application/vnd.oci.image.layer.v1.tar+gzip ]] ||
  fail "estargz media type: $(field estargz-1.json 'j["media_type"]')"
[[ "$(field zstd-chunked-1.json 'j["media_type"]')" == application/vnd.oci.image.layer.v1.tar+zstd ]] ||
  fail "zstd:chunked media type: $(field zstd-chunked-1.json 'j["media_type"]')"

check "gzip -dc and zstd -dc read them as tars that tar -t lists"
gzip -dc gzip-1.blob | tar -t >list-gzip || fail "tar -t of the gzip layer"
gzip -dc estargz-1.blob >estargz.tar || fail "gzip -dc of the estargz blob"
tar -tf estargz.tar >list-estargz || fail "tar -t of the estargz layer"
[[ "$(head -1 list-estargz)" == .no.prefetch.landmark ]] || fail "estargz's first entry is $(head -1 list-estargz)"
[[ "$(tail -1 list-estargz)" == stargz.index.json ]] || fail "estargz's last entry is $(tail -1 list-estargz)"
diff <(sed '1d;$d' list-estargz) list-gzip >/dev/null || fail "estargz lists other entries than gzip: $(diff <(sed '1d;$d' list-estargz) list-gzip | head)"
[[ "sha256:$(sha256sum <estargz.tar | cut -c1-64)" == "$(field estargz-1.json 'j["diff_id"]')" ]] ||
  fail "the estargz diff_id is not the sha256 of its gunzipped stream"
[[ "$(field estargz-1.json 'j["annotations"]["io.containers.estargz.uncompressed-size"]')" == "$(stat -c %s estargz.tar)" ]] ||
  fail "io.containers.estargz.uncompressed-size is not the size of the gunzipped stream"
zstd -dc zstd-chunked-1.blob >chunked.tar || fail "zstd -dc of the zstd:chunked blob"
tar -tf chunked.tar >list-chunked || fail "tar -t of the zstd:chunked layer"
diff list-chunked list-gzip >/dev/null || fail "zstd:chunked lists other entries than gzip"
[[ "$(field zstd-chunked-1.json 'j["diff_id"]')" == "$(field gzip-1.json 'j["diff_id"]')" ]] ||
  fail "zstd:chunked's diff_id differs from gzip's: the tar inside should be the same"
[[ "sha256:$(sha256sum <chunked.tar | cut -c1-64)" == "$(field gzip-1.json 'j["diff_id"]')" ]] ||
  fail "zstd -dc of the zstd:chunked blob is not the gzip layer's tar"
grep -q '"containerd.io/snapshot/stargz/toc.digest": "sha256:' estargz-1.json || fail "no toc.digest annotation"
grep -q '"io.containers.zstd-chunked.manifest-checksum": "sha256:' zstd-chunked-1.json || fail "no manifest-checksum annotation"
grep -Eq '"io.containers.zstd-chunked.manifest-position": "[0-9]+:[0-9]+:[0-9]+:1"' zstd-chunked-1.json ||
  fail "no manifest-position annotation"

check "images in each format carry the annotations and unpack to the gzip image's tree"
cat >in/rich.yaml <<YAML
stack: rich
source_date_epoch: $EPOCH
layers:
  - name: tree
    copy:
      - {src: tree/, dst: /opt/app/}
  - name: plain
    copy:
      - {src: tree/README, dst: /etc/readme}
tags: ["rich:1.0"]
YAML
for comp in gzip estargz zstd:chunked; do
  name=${comp/:/-}
  expect_ok "build-$name" sb build in/rich.yaml -o "$TMP/img-$name" --compression "$comp" --store "$STORE"
  expect_ok "unpack-$name" sb unpack "img-$name:1.0" "$TMP/out-$name" --store "$STORE"
done
for name in estargz zstd-chunked; do
  expect_ok "cmp-$name" python3 "$HERE/treecmp.py" out-gzip "out-$name" --clamp "$EPOCH"
done
m=$(manifest_digest img-estargz 1.0)
[[ "$(json "img-estargz/blobs/sha256/$m" 'len([l for l in j["layers"] if "containerd.io/snapshot/stargz/toc.digest" in l.get("annotations", {})])')" == 2 ]] ||
  fail "the estargz manifest's layers lack the toc.digest annotation: $(cat "img-estargz/blobs/sha256/$m")"
m=$(manifest_digest img-zstd-chunked 1.0)
[[ "$(json "img-zstd-chunked/blobs/sha256/$m" 'len([l for l in j["layers"] if "io.containers.zstd-chunked.manifest-checksum" in l.get("annotations", {})])')" == 2 ]] ||
  fail "the zstd:chunked manifest's layers lack the manifest-checksum annotation"

check "a file named stargz.index.json in a plain gzip layer is unpacked"
mkdir -p in/toc && printf '{}' >in/toc/stargz.index.json && printf 'f' >in/toc/.no.prefetch.landmark
cat >in/toc.yaml <<YAML
stack: toc
layers:
  - name: toc
    copy:
      - {src: toc/, dst: /}
tags: ["toc:1.0"]
YAML
expect_ok build-toc sb build in/toc.yaml -o "$TMP/img-toc" --store "$STORE"
expect_ok unpack-toc sb unpack img-toc:1.0 "$TMP/out-toc" --store "$STORE"
[[ -f out-toc/stargz.index.json && -f out-toc/.no.prefetch.landmark ]] || fail "a gzip layer's stargz.index.json was left out"
[[ ! -e out-estargz/stargz.index.json && ! -e out-estargz/.no.prefetch.landmark ]] ||
  fail "stackbuild unpack left eStargz's own entries in the tree"

check "skopeo copies the layouts, keeping the annotations, and umoci unpacks the eStargz copy"
for name in estargz zstd-chunked; do
  expect_ok "skopeo-$name" skopeo copy "oci:img-$name:1.0" "oci:copy-$name:1.0"
  m=$(manifest_digest "copy-$name" 1.0)
  grep -q 'zstd-chunked.manifest-checksum\|stargz/toc.digest' "copy-$name/blobs/sha256/$m" ||
    fail "skopeo's copy of the $name image dropped the layer annotations"
done
# Debian's umoci (0.4.7) reads no zstd layer at all, plain zstd neither: it is
# given the eStargz copy only; zstd:chunked's readers are zstd -dc and unpack above.
expect_ok umoci-estargz umoci unpack --rootless --image copy-estargz:1.0 "$TMP/bundle-estargz"
rootfs=bundle-estargz/rootfs
[[ -f $rootfs/stargz.index.json && -f $rootfs/.no.prefetch.landmark ]] ||
  fail "umoci's tree lacks eStargz's entries: did the layer lose its TOC?"
expect_ok cmp-umoci-estargz python3 "$HERE/treecmp.py" out-gzip "$rootfs" --clamp "$EPOCH" \
  --ignore stargz.index.json --ignore .no.prefetch.landmark
check "stackbuild unpack reads the skopeo copies too"
for name in estargz zstd-chunked; do
  expect_ok "unpack-copy-$name" sb unpack "copy-$name:1.0" "$TMP/out-copy-$name" --store "$STORE"
  expect_ok "cmp-copy-$name" python3 "$HERE/treecmp.py" out-gzip "out-copy-$name" --clamp "$EPOCH"
done
pass
