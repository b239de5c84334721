#!/usr/bin/env bash
# The layer pipeline's threads (the tar, the diff_id hash, the compressors, the blob's
# hash and writing) never change a byte: `stackbuild layer` of one tree with -j 1, -j 2
# and -j 16 gives the same diff_id, digest and size in each compression, from a fresh
# store each time, and --json says where the time went (its stages).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$TMP"

check "a tree with 24 MiB of data in many files and one big one"
umask 022
make_tree tree --big 16
python3 - <<'PY'
import os, random
rng = random.Random(2)
for n in range(200):
    os.makedirs(f"tree/many/{n % 10}", exist_ok=True)
    with open(f"tree/many/{n % 10}/f{n}.bin", "wb") as f:
        f.write(rng.randbytes(rng.randrange(0, 80000)).translate(bytes(b"abcdefgh"[i % 8] for i in range(256))))
PY

for comp in gzip zstd none; do
  first=
  for j in 1 2 16; do
    check "$comp with -j $j"
    expect_ok "layer-$comp-$j" sb layer tree --compression "$comp" -j "$j" --store "store-$comp-$j" \
      --source-date-epoch 1700000000 --json
    got=$(json "$TMP/layer-$comp-$j.out" '" ".join([j["diff_id"], j["digest"], str(j["size"])])')
    [[ -n "$first" ]] || first=$got
    [[ "$got" == "$first" ]] || fail "$comp: -j $j gave '$got', -j 1 gave '$first'"
    stages=$(json "$TMP/layer-$comp-$j.out" 'j["stages"]')
    [[ $(json "$TMP/layer-$comp-$j.out" 'j["stages"]["bound_by"] in ("tar", "diff hash", "compress", "blob")') == True ]] ||
      fail "$comp -j $j: no stage named as the bound: $stages"
    [[ $(json "$TMP/layer-$comp-$j.out" 'all(j["stages"][k] >= 0 for k in ("tar", "diff_hash", "compress", "blob")) and j["stages"]["wall"] > 0') == True ]] ||
      fail "$comp -j $j: stage times are off: $stages"
    verify_blobs "store-$comp-$j"
  done
  say "$comp: $first"
done
pass
