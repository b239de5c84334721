#!/usr/bin/env bash
# Deletions and replaced directories made by build steps become correct whiteouts
# (runs as root; skipped otherwise). A 3-layer recipe: a copy layer (static busybox
# and a /data tree), a step layer that adds, changes and deletes, and a top step layer
# that deletes files and directories of both layers below, replaces directories by
# directories (rm -rf + mkdir), a file by a directory and a directory by a file, adds
# a symlink, changes a directory's mode, and only touches or rewrites files with the
# same content. The same two scripts run on a copy of the base on the host give the
# expected tree. Then:
#   - `umoci unpack --rootless` and `stackbuild unpack` both give the expected tree;
#   - the top layer holds exactly the expected entries: whiteouts for what was removed,
#     nothing for what was only touched;
#   - the copy-and-compare fallback (STACKBUILD_SANDBOX_OVERLAY=0) gives byte-identical
#     layers;
#   - editing the top layer rebuilds it alone; a rebuild with no change builds nothing.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
require_tool umoci
cd "$TMP"
umask 022

make_busybox_root base
mkdir -p base/data/dir1/deep base/data/dir2 base/data/dir3 base/data/dir5 base/data/dir6
for f in keep gone touched same unchanged-mode dir1/a dir1/deep/b dir2/x dir2/y dir3/p dir3/q dir5/z dir6/w replace-me; do
  echo "base $f" >"base/data/$f"
done

cat >mid.sh <<'EOF'
set -e
echo mid >$ROOT/data/mid.txt
rm $ROOT/data/gone
mkdir -p $ROOT/data/newdir/sub
echo n >$ROOT/data/newdir/sub/n.txt
echo appended >>$ROOT/data/keep
EOF
cat >top.sh <<'EOF'
set -e
rm -rf $ROOT/data/dir1
rm -rf $ROOT/data/dir2 && mkdir $ROOT/data/dir2 && echo new >$ROOT/data/dir2/new && echo x-again >$ROOT/data/dir2/x
rm $ROOT/data/replace-me && mkdir $ROOT/data/replace-me && echo f >$ROOT/data/replace-me/f
rm -rf $ROOT/data/dir3 && echo now-a-file >$ROOT/data/dir3
rm -rf $ROOT/data/dir6 && mkdir $ROOT/data/dir6 && echo "base dir6/w" >$ROOT/data/dir6/w
touch $ROOT/data/touched
chmod 644 $ROOT/data/unchanged-mode
cat $ROOT/data/same >$ROOT/data/same.tmp && mv $ROOT/data/same.tmp $ROOT/data/same
rm $ROOT/data/mid.txt
rm -rf $ROOT/data/newdir/sub
ln -s keep $ROOT/data/link
chmod 700 $ROOT/data/dir5
EOF

write_recipe() {  # write_recipe FILE [EXTRA-TOP-COMMAND]
  cat >"$1" <<EOF
stack: wh
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - {name: mid, build: {env: {ROOT: ""}, run: [[/bin/sh, /src/mid.sh]], cache: []}}
  - {name: top, build: {env: {ROOT: ""}, run: [[/bin/sh, /src/top.sh]${2:+, \"$2\"}]}}
tags: ["wh:1"]
EOF
}
# The scripts reach the steps through the base layer.
mkdir -p base/src && cp mid.sh top.sh base/src/

check "the expected tree: the scripts run on a copy of the base on the host"
expected_copy base expected
ROOT=$TMP/expected sh mid.sh
ROOT=$TMP/expected sh top.sh

write_recipe wh.yaml
check "a 3-layer recipe with deleting steps builds"
expect_ok build sb build wh.yaml -o out --store "$STORE"

check "umoci unpack --rootless gives the expected tree"
expect_ok umoci umoci unpack --rootless --image out:1 bundle
expect_ok cmp-umoci python3 "$HERE/treecmp.py" expected bundle/rootfs
check "stackbuild unpack gives the expected tree"
expect_ok unpack sb unpack out:1 rootfs --store "$STORE"
expect_ok cmp-sb python3 "$HERE/treecmp.py" expected rootfs

check "the top layer holds the whiteouts and changes, and nothing only touched"
top=$(json "out/blobs/sha256/$(manifest_digest out 1)" 'j["layers"][2]["digest"][7:]')
python3 - "out/blobs/sha256/$top" >top.list <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    for m in t.getmembers():
        print(m.name + ("/" if m.isdir() else ""))
PY
cat >top.want <<'EOF'
data/
data/.wh.dir1
data/.wh.mid.txt
data/dir2/
data/dir2/.wh.y
data/dir2/new
data/dir2/x
data/dir3
data/dir5/
data/link
data/newdir/
data/newdir/.wh.sub
data/replace-me/
data/replace-me/f
EOF
diff -u top.want top.list >&2 || fail "the top layer's entries differ from the expected (above)"

check "the copy-and-compare fallback gives byte-identical layers"
STACKBUILD_SANDBOX_OVERLAY=0 expect_ok build-copy sb build wh.yaml -o out-copy --store "$TMP/store-copy"
grep -q "full copy of its root" "$TMP/build-copy.err" || { show_output build-copy; fail "the fallback was not used"; }
overlay_digests=$(image_digests out 1) && copy_digests=$(image_digests out-copy 1) || fail "no image '1' in out or out-copy"
[[ "$overlay_digests" == "$copy_digests" ]] || fail "overlay and copy fallback differ: $overlay_digests vs $copy_digests"

check "a rebuild with nothing changed builds nothing"
expect_ok rebuild sb build wh.yaml -o out --store "$STORE"
grep -q "(0 built, 3 from the cache)" "$TMP/rebuild.err" || { show_output rebuild; fail "the rebuild built layers"; }
check "editing the top layer rebuilds it alone"
write_recipe wh2.yaml "echo edited >/data/edited"
expect_ok edited sb build wh2.yaml -o out2 --store "$STORE"
grep -q "(1 built, 2 from the cache)" "$TMP/edited.err" || { show_output edited; fail "not exactly the top layer was rebuilt"; }
edited_digests=$(image_digests out2 1) || fail "no image '1' in out2"
[[ "$(grep -E '^layer[01] ' <<<"$overlay_digests")" == "$(grep -E '^layer[01] ' <<<"$edited_digests")" ]] ||
  fail "the layers below the edited one changed"
[[ "$(grep -E '^layer2 ' <<<"$overlay_digests")" != "$(grep -E '^layer2 ' <<<"$edited_digests")" ]] ||
  fail "the edited top layer did not change"

# A build-step layer over the budget: split by top-level path, each whiteout in
# the part of what it hides, so the parts stacked give the unsplit layer's tree.
cat >wide.sh <<'EOF'
set -e
mkdir -p /opt/tool && echo tool >/opt/tool/run
mkdir /srv && echo blob >/srv/blob
rm -rf /data/dir1 /sbin
rm -rf /data/dir2 && mkdir /data/dir2 && echo new >/data/dir2/new
EOF
expected_copy base base2
cp wide.sh base2/src/
cat >split.yaml <<'EOF'
stack: wh
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base2/, dst: /}]}
  - {name: wide, build: {run: [[/bin/sh, /src/wide.sh]]}}
tags: ["wh:split"]
EOF
check "over --layer-budget 1 a build-step layer splits by top-level path, whiteouts with what they hide"
expect_ok whole sb build split.yaml -o whole --store "$STORE" --layer-budget 0
for run in a b; do  # two stores: the steps run again for the second
  expect_ok "split-$run" sb build split.yaml -o "split-$run" --store "$TMP/store-$run" --layer-budget 1
done
grep -q "layer wide: .* split by top-level path into 3 layers" "$TMP/split-a.err" ||
  { show_output split-a; fail "no split of layer wide reported"; }
[[ $(image_digests split-a split) == "$(image_digests split-b split)" ]] || fail "two split builds differ"
python3 "$HERE/split_parts.py" split-a split >parts || fail "the split parts are not sound (above)"
# data 4 B | opt 5 B | sbin 0 B (its whiteout) and srv 5 B: a part holding nothing yet takes the next group.
grep -qx "parts wide build 3" parts || fail "layer wide is not data | opt | sbin, srv: $(grep ^parts parts)"
part_of() { awk -v n="$1" -v p="$2" '$1 == "entry" && $3 == n && $4 == p { print $2 }' parts; }
wide0=$(awk '$1 == "entry" && $3 == "wide" { print $2; exit }' parts)
[[ $(part_of wide data/.wh.dir1) == "$wide0" && $(part_of wide data/dir2/new) == "$wide0" &&
  $(part_of wide .wh.sbin) == $((wide0 + 2)) && $(part_of wide srv/blob) == $((wide0 + 2)) ]] ||
  fail "the parts of layer wide: $(grep ' wide ' parts)"
expect_ok unpack-whole sb unpack whole:split whole-root --store "$STORE"
[[ ! -e whole-root/sbin && ! -e whole-root/data/dir1 && -f whole-root/srv/blob ]] || fail "the steps' changes are not in the image"
expect_ok unpack-split sb unpack split-a:split split-root --store "$TMP/store-a"
expect_ok cmp-split python3 "$HERE/treecmp.py" whole-root split-root
expect_ok umoci-split umoci unpack --rootless --image split-a:split split-bundle
expect_ok cmp-split-umoci python3 "$HERE/treecmp.py" whole-root split-bundle/rootfs
expect_ok split-again sb build split.yaml -o split-a --store "$TMP/store-a" --layer-budget 1
grep -q "(0 built, 2 from the cache)" "$TMP/split-again.err" || { show_output split-again; fail "the split rebuild was not cached"; }
pass
