#!/usr/bin/env bash
# Large -j with pushes and pulls, against the real registry (distribution 2.8): an image
# of 70 layers pushed by `build -j 100 --push-to` (build's -j goes up to 256, and push
# takes it as its blob concurrency), then pushed and pulled with -j 256 under a limit of
# 48 open files: the number of connections stays within it, and everything completes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo
start_registry jobs
R="127.0.0.1:$REG_PORT"
mkdir -p "$TMP/r/f"
{
  echo "stack: many"
  echo "layers:"
  for i in $(seq 70); do
    echo "layer $i" >"$TMP/r/f/$i.txt"
    echo "  - {name: l$i, copy: [{src: f/$i.txt, dst: /f/$i.txt}]}"
  done
  echo 'tags: ["many:1"]'
} >"$TMP/r/recipe.yaml"

check "build -j 100 --push-to: 71 blobs pushed, the registry holds the image"
expect_ok build sb build "$TMP/r/recipe.yaml" -o "$TMP/layout" -j 100 --push-to "$R/many:1" --store "$STORE"
M=$(manifest_digest "$TMP/layout" 1)
grep -q "blobs: 71 sent" "$TMP/build.err" || { show_output build; fail "not every blob was sent"; }
[[ "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$R/many:1")" == "sha256:$M" ]] ||
  fail "the registry holds another image"

check "push -j 256 with 48 open files allowed: fewer connections, said so, and the push completes"
expect_ok push bash -c 'ulimit -n 48 && "$@"' _ "$SB" push "$TMP/layout:1" "$R/other:1" -j 256 --store "$TMP/store2" \
  --progress plain
grep -q "blobs at once, not 256: the limit on open files" "$TMP/push.err" || { show_output push; fail "no note on the limit"; }
grep -q "blobs: 71 sent" "$TMP/push.err" || { show_output push; fail "not every blob was sent"; }
[[ "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$R/other:1")" == "sha256:$M" ]] ||
  fail "the registry holds another image"

check "pull -j 256 with 48 open files allowed: every blob, verified"
expect_ok pull bash -c 'ulimit -n 48 && "$@"' _ "$SB" pull "$R/other:1" "$TMP/pulled:p" -j 256 --store "$TMP/store3" \
  --progress plain
[[ "$(manifest_digest "$TMP/pulled" p)" == "$M" ]] || fail "the pulled image differs"
verify_blobs "$TMP/pulled"

check "-j beyond 256 is a usage error"
expect_rc 2 big sb push "$TMP/layout:1" "$R/other:1" -j 257 --store "$STORE"
grep -q "option -j wants an integer from 1 to 256" "$TMP/big.err" || { show_output big; fail "no clear usage error"; }
pass
