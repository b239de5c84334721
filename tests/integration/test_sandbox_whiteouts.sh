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
pass
