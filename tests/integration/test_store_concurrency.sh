#!/usr/bin/env bash
# Two builds of the same recipe on the same --store at the same moment, into two
# outputs. The layer of 40 MiB of fixed pseudo-random data takes long enough that they
# overlap. Both must succeed with the same digests; the store must hold no temp files
# afterwards and every blob in it must hash to its name; a third build must take every
# layer from the cache.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool sha256sum cmp diff
cd "$TMP"

check "generate the input: 40 MiB of fixed data (random.Random(1)) and a small layer"
python3 - <<'PY'
import os, random
rng = random.Random(1)
table = bytes(b"abcdefghijklmnop"[i % 16] for i in range(256))   # compressible, not trivially
os.makedirs("in/big/data", exist_ok=True)
for n in range(4):
    with open(f"in/big/data/part{n}.bin", "wb") as f:
        for _ in range(10):
            f.write(rng.randbytes(1 << 20).translate(table))
os.makedirs("in/small/etc", exist_ok=True)
with open("in/small/etc/app.conf", "w") as f:
    f.write("answer = 42\n")
PY
[[ "$(cat in/big/data/*.bin | wc -c)" -eq $((40 << 20)) ]] || fail "the generated data is not 40 MiB"
cat >recipe.yaml <<'YAML'
stack: conc
source_date_epoch: 1704067200
layers:
  - name: big
    copy:
      - {src: in/big/, dst: /opt/big/}
  - name: small
    copy:
      - {src: in/small/etc/app.conf, dst: /etc/app.conf}
tags: ["conc:1"]
YAML

check "two builds started together on one store both succeed"
start_build() {  # start_build N: waits for the file 'go', then builds into out$N
  (
    while [[ ! -e go ]]; do sleep 0.005; done
    exec "$SB" build recipe.yaml -o "out$1" --store "$STORE" --progress plain -j 1 >"build$1.out" 2>"build$1.err"
  ) &
}
start_build 1
pid1=$!
start_build 2
pid2=$!
t0=$(date +%s.%N)
touch go
rc1=0; wait "$pid1" || rc1=$?
t1=$(date +%s.%N)
rc2=0; wait "$pid2" || rc2=$?
t2=$(date +%s.%N)
for n in 1 2; do sed "s/^/  [build $n] /" "build$n.out" "build$n.err"; done
say "build 1 took $(python3 -c "print(f'{$t1 - $t0:.2f}')")s, both done after $(python3 -c "print(f'{$t2 - $t0:.2f}')")s"
[[ $rc1 -eq 0 ]] || fail "build 1 exited $rc1"
[[ $rc2 -eq 0 ]] || fail "build 2 exited $rc2"

check "each layer was built once: the other build waited and took it from the cache"
built=$(cat build1.out build1.err build2.out build2.err | awk '/^layers: [0-9]+ \([0-9]+ built,/ { sub(/^\(/, "", $3); n += $3 } END { print n + 0 }')
[[ "$built" == 2 ]] || fail "the two builds built $built layers between them, expected 2 (each layer once)"

check "both outputs hold the same image, byte for byte"
diff <(image_digests out1 1) <(image_digests out2 1) || fail "the two builds give different digests"
cmp out1/index.json out2/index.json || fail "the two index.json differ"
diff -r out1/blobs out2/blobs || fail "the two layouts' blobs differ"
image_digests out1 1 | sed 's/^/  /'

check "the store holds no temp files, and every blob hashes to its name"
left=$(store_temps "$STORE")
[[ -z "$left" ]] || fail "temp files left in the store: $left"
verify_blobs "$STORE"
verify_blobs out1
verify_blobs out2
# Each layer is in the store once (no duplicate written under another name).
for l in $(image_digests out1 1 | awk '/^layer/ { sub("sha256:", "", $2); print $2 }'); do
  [[ -f "$STORE/blobs/sha256/$l" ]] || fail "layer $l is not in the store"
done

check "a rebuild takes every layer from the cache"
expect_ok rebuild sb build recipe.yaml -o out3 --store "$STORE"
sed 's/^/  [rebuild] /' "$TMP/rebuild.out" "$TMP/rebuild.err"
grep -qE '\(0 built, 2 from the cache\)' "$TMP/rebuild.out" "$TMP/rebuild.err" ||
  fail "the rebuild did not report '(0 built, 2 from the cache)'"
[[ $(cat "$TMP/rebuild.out" "$TMP/rebuild.err" | grep -cE '^layer (big|small): cached ') -eq 2 ]] ||
  fail "the rebuild did not report each layer as cached"
diff <(image_digests out1 1) <(image_digests out3 1) || fail "the rebuild from the cache gives other digests"
left=$(store_temps "$STORE")
[[ -z "$left" ]] || fail "temp files left in the store after the rebuild: $left"

pass
