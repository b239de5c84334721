#!/usr/bin/env bash
# Push and pull of a many-blob image, several blobs at once (-j 64), under low limits on
# open files (ulimit -n 24, 32, 48, 64), again and again against the real registry
# (distribution 2.8): every run exits 0, the registry holds the layout's manifest (skopeo)
# and the pulled layout has the same manifest and verified blobs. Each transfer holds a
# socket, curl's socketpair and a store or blob file; the concurrency is sized for them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo
start_registry fdlimit
R="127.0.0.1:$REG_PORT"

# 30 layers: 4 of random bytes (256-768 KiB, several chunks each with --chunk-size 64 KiB), 26 small.
mkdir -p "$TMP/r/f"
{
  echo "stack: fds"
  echo "layers:"
  for i in $(seq 30); do
    if ((i <= 4)); then
      python3 -c 'import random,sys; open(sys.argv[1],"wb").write(random.Random(int(sys.argv[2])).randbytes(int(sys.argv[2])<<18))' \
        "$TMP/r/f/$i.bin" "$i"
    else
      echo "file $i" >"$TMP/r/f/$i.bin"
    fi
    echo "  - {name: l$i, copy: [{src: f/$i.bin, dst: /f/$i.bin}]}"
  done
  echo 'tags: ["fds:1"]'
} >"$TMP/r/recipe.yaml"
expect_ok build sb build "$TMP/r/recipe.yaml" -o "$TMP/layout" -j 4 --compression gzip --level 1 --store "$STORE"
M=$(manifest_digest "$TMP/layout" 1)

# limited N CMD...: CMD with at most N open files (soft and hard: nothing to raise it to).
limited() {
  local n=$1
  shift
  bash -c 'ulimit -n "$1" && shift && exec "$@"' _ "$n" "$@"
}

runs=0
for round in 1 2; do
  for n in 24 32 48 64; do
    repo="fd$round-$n"
    chunk=()
    ((round == 2)) && chunk=(--chunk-size 65536)
    check "round $round, ulimit -n $n: push -j 64 ${chunk[*]} exits 0 and the registry holds the image"
    expect_ok "push$repo" limited "$n" "$SB" push "$TMP/layout:1" "$R/$repo:1" -j 64 "${chunk[@]}" \
      --store "$TMP/s-$repo" --progress plain
    grep -q "blobs: 31 sent" "$TMP/push$repo.err" || { show_output "push$repo"; fail "not every blob was sent"; }
    got=$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$R/$repo:1")
    [[ "$got" == "sha256:$M" ]] || fail "the registry holds $got for $repo, the layout sha256:$M"

    check "round $round, ulimit -n $n: pull -j 64 exits 0 with the same manifest and verified blobs"
    expect_ok "pull$repo" limited "$n" "$SB" pull "$R/$repo:1" "$TMP/p-$repo:p" -j 64 --store "$TMP/ps-$repo" \
      --progress plain
    [[ "$(manifest_digest "$TMP/p-$repo" p)" == "$M" ]] || fail "the image pulled from $repo differs"
    verify_blobs "$TMP/p-$repo"
    [[ -z "$(store_temps "$TMP/ps-$repo")" ]] || fail "temporary files left in the store after the pull"
    runs=$((runs + 1))
  done
done
say "$runs pushes and pulls under ulimit -n 24..64, all complete"
pass
