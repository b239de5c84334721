#!/usr/bin/env bash
# End to end on a real, large tree: the CUDA toolkit at /usr/local/cuda (~2.7 GB).
# The layer is the same for -j1 and -j2, for gzip and zstd both; umoci and
# stackbuild unpack it to a tree equal to the original (content, modes, links).
# Label e2e: minutes of CPU and ~10 GB of scratch space; not in the default run.
source "$(dirname "$0")/../integration/lib.sh"
require_tool umoci
tree=$(readlink -f /usr/local/cuda 2>/dev/null || true)
[[ -n "$tree" && -d "$tree" ]] || skip "no CUDA toolkit at /usr/local/cuda"
avail=$(df -Pk "$TMP" | awk 'NR==2 {print $4}')
(( avail > 12 * 1024 * 1024 )) || skip "needs 12 GB free in $TMP"

layer_json() { "$SB" layer "$tree" --store "$STORE" --progress plain "$@" 2>/dev/null; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

for comp in gzip zstd; do
  check "$comp: -j1 and -j2 give the same layer"
  one=$(layer_json --compression "$comp" --jobs 1)
  two=$(layer_json --compression "$comp" --jobs 2)
  [[ $(field digest <<<"$one") == $(field digest <<<"$two") ]] || fail "$comp digests differ: $one / $two"
  [[ $(field diff_id <<<"$one") == $(field diff_id <<<"$two") ]] || fail "$comp diff_ids differ"
  say "$comp: $(field digest <<<"$one"), $(field size <<<"$one") bytes"
done

check "stackbuild extract of the gzip layer equals the original tree"
blob="$TMP/layer.tar.gz"
layer_json --compression gzip -o "$blob" >/dev/null
"$SB" extract "$TMP/x" "$blob" 2>/dev/null
python3 "$HERE/treecmp.py" "$tree" "$TMP/x" || fail "extracted tree differs from $tree"
rm -rf "$TMP/x"

check "umoci unpack of an image holding the layer equals the original tree"
mkdir -p "$TMP/recipe"
cat > "$TMP/recipe/cuda.yaml" <<YAML
stack: cuda-tree
layers:
  - name: cuda
    preserve_modes: true
    copy: [{src: "$tree/", dst: /usr/local/cuda/}]
tags: ["cuda-tree:t"]
YAML
"$SB" build "$TMP/recipe/cuda.yaml" -o "$TMP/layout" --store "$STORE" --progress plain --allow-host-paths >/dev/null 2>&1 ||
  fail "build of the CUDA tree failed"
umoci unpack --rootless --image "$TMP/layout:t" "$TMP/bundle" >/dev/null 2>&1 || fail "umoci unpack failed"
python3 "$HERE/treecmp.py" "$tree" "$TMP/bundle/rootfs/usr/local/cuda" || fail "umoci's tree differs from $tree"
pass
