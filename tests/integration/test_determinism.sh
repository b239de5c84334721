#!/usr/bin/env bash
# The same recipe and inputs give the same bytes, whatever the machine state around
# them. Two copies of a rich input tree (see make_tree.py, plus 8 MiB of fixed data so
# that parallel compression splits it) differ in everything a build must ignore:
#   directory, creation order, umask (022 vs 077), mtimes (two dates after the recipe's
#   source_date_epoch, so both clamp to it), working directory, --store, --threads (1 vs 2),
#   TZ, locale and $SOURCE_DATE_EPOCH in the environment (the recipe's value wins).
# For gzip and for zstd, the two OCI layouts must be byte-identical: index.json and
# every blob (so the layer diff_ids, layer digests, config and manifest digests agree).
# Then one byte of one file changes: the manifest, config and that layer's digest
# change, the other layer's do not.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool cmp diff
cd "$TMP"

EPOCH=1704067200
recipe() {
  cat <<YAML
stack: det
source_date_epoch: $EPOCH
layers:
  - name: tree
    copy:
      - {src: tree/, dst: /opt/app/}
  - name: secret
    copy:
      - {src: secret.key, dst: /etc/app/secret.key, mode: "0600"}
config:
  env: {PATH: "/usr/bin:/bin"}
  entrypoint: [/opt/app/bin/tool]
annotations: {title: det}
tags: ["det:1"]
YAML
}

check "two copies of the input: different dirs, creation order, umask and mtimes"
mkdir -p a b/deeper/work
(umask 022 && cd a && make_tree tree --big 8 && printf 'k\n' >secret.key && recipe >recipe.yaml)
(umask 077 && cd b/deeper/work && make_tree tree --reverse --big 8 && printf 'k\n' >secret.key && recipe >recipe.yaml)
find a -exec touch -h -d '2024-06-01 10:00:00 UTC' {} +
find b -exec touch -h -d '2025-11-30 23:59:59 UTC' {} +
B=b/deeper/work
# The copies must really differ where the build has to normalise.
[[ "$(stat -c %a a/tree/bin/tool)" == 755 && "$(stat -c %a $B/tree/bin/tool)" == 700 ]] ||
  fail "the two trees do not differ in modes as intended"
[[ "$(stat -c %Y a/tree/README)" != "$(stat -c %Y $B/tree/README)" ]] || fail "the two trees have the same mtimes"
# ... and be the same in content.
diff -r --no-dereference a/tree $B/tree >/dev/null || fail "the two trees differ in content"

# build_both COMPRESSION: builds a (--threads 1) and b (--threads 2) into a/out-COMP and b/.../out-COMP.
build_both() {
  local c=$1
  expect_ok "build-a-$c" in_dir "$TMP/a" env TZ=UTC LC_ALL=C SOURCE_DATE_EPOCH=1 \
    "$SB" build recipe.yaml -o "out-$c" --compression "$c" --threads 1 --store "$TMP/store-a" --progress plain
  expect_ok "build-b-$c" in_dir "$TMP/$B" env TZ=Asia/Tokyo LC_ALL=C.UTF-8 SOURCE_DATE_EPOCH=1999999999 \
    "$SB" build "$TMP/$B/recipe.yaml" -o "$TMP/$B/out-$c" --compression "$c" --threads 2 --store "$TMP/store-b" --progress plain
}

# same_layout X Y: index.json byte-identical and the same blobs, byte for byte.
same_layout() {
  cmp "$1/index.json" "$2/index.json" || fail "$1/index.json and $2/index.json differ"
  cmp "$1/oci-layout" "$2/oci-layout" || fail "$1/oci-layout and $2/oci-layout differ"
  diff -r "$1/blobs" "$2/blobs" || fail "the blobs of $1 and $2 differ"
  diff <(image_digests "$1" 1) <(image_digests "$2" 1) || fail "the image digests of $1 and $2 differ"
}

for c in gzip zstd; do
  check "$c: the two builds (--threads 1 vs 2, different stores, dirs, TZ, locale) are byte-identical"
  build_both "$c"
  same_layout "a/out-$c" "$B/out-$c"
  image_digests "a/out-$c" 1 | sed "s/^/  $c: /"
  check "$c: the recipe's source_date_epoch won over \$SOURCE_DATE_EPOCH (created is $EPOCH)"
  cfg=$(json "a/out-$c/blobs/sha256/$(manifest_digest "a/out-$c" 1)" 'j["config"]["digest"][7:]')
  [[ "$(json "a/out-$c/blobs/sha256/$cfg" 'j["created"]')" == 2024-01-01T00:00:00Z ]] ||
    fail "config.created is not 2024-01-01T00:00:00Z"
  [[ $(find "a/out-$c/blobs/sha256" -type f | wc -l) -eq 4 ]] || fail "expected 4 blobs (2 layers, config, manifest) in a/out-$c"
done

check "gzip and zstd builds have the same diff_ids (the same tars), different layer digests"
diff <(image_digests a/out-gzip 1 | grep ^diff_id) <(image_digests a/out-zstd 1 | grep ^diff_id) ||
  fail "the diff_ids of the gzip and zstd builds differ"
[[ "$(image_digests a/out-gzip 1 | grep ^layer0)" != "$(image_digests a/out-zstd 1 | grep ^layer0)" ]] ||
  fail "the gzip and zstd layers have the same digest"

check "a rebuild of a from its own store is identical too (the cache gives the same bytes)"
expect_ok rebuild-a in_dir "$TMP/a" sb build recipe.yaml -o out-gzip-again --store "$TMP/store-a"
same_layout a/out-gzip a/out-gzip-again

check "one byte changed in one file: the manifest and that layer change, the other layer does not"
f="$B/tree/share/deep/nested/dir/leaf.txt"
before=$(stat -c %s "$f")
printf 'L' | dd of="$f" bs=1 seek=0 conv=notrunc status=none       # "leaf" -> "Leaf"
touch -d '2025-11-30 23:59:59 UTC' "$f"
[[ "$(stat -c %s "$f")" == "$before" ]] || fail "the edit changed the size"
expect_ok build-b-changed in_dir "$TMP/$B" sb build recipe.yaml -o out-changed --store "$TMP/store-b"
old=$(image_digests a/out-gzip 1)
new=$(image_digests "$B/out-changed" 1)
field() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }
say "manifest: $(field manifest "$old") -> $(field manifest "$new")"
say "layer0 (tree): $(field layer0 "$old") -> $(field layer0 "$new")"
say "layer1 (secret): $(field layer1 "$old") -> $(field layer1 "$new")"
[[ "$(field manifest "$old")" != "$(field manifest "$new")" ]] || fail "the manifest digest did not change"
[[ "$(field config "$old")" != "$(field config "$new")" ]] || fail "the config digest did not change"
[[ "$(field layer0 "$old")" != "$(field layer0 "$new")" ]] || fail "the changed layer's digest did not change"
[[ "$(field diff_id0 "$old")" != "$(field diff_id0 "$new")" ]] || fail "the changed layer's diff_id did not change"
[[ "$(field layer1 "$old")" == "$(field layer1 "$new")" ]] || fail "the unchanged layer's digest changed"
[[ "$(field diff_id1 "$old")" == "$(field diff_id1 "$new")" ]] || fail "the unchanged layer's diff_id changed"

pass
