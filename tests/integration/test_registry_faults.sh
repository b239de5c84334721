#!/usr/bin/env bash
# Push of a ~100 MB image through a fault-injecting proxy (connections cut in the
# middle of blob bodies, 500s, 429 with Retry-After, ~30% of requests, seeded):
# the push completes, large blobs resume where the registry's upload stands
# instead of starting again, and the registry ends up with exactly the image.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo

image_fixture "$TMP/img" 96
LAYOUT="$TMP/img/layout"
M=$(manifest_digest "$LAYOUT" 1)
BIG=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(max(l["size"] for l in m["layers"]))' \
  "$LAYOUT/blobs/sha256/$M")
start_registry faults
start_proxy "$REG_PORT" "$TMP/faults.jsonl" --seed 42 --rate 0.3 --cut-min 1048576
R="127.0.0.1:$PROXY_PORT"

check "the push through the proxy completes"
expect_ok push sb push "$LAYOUT:1" "$R/flaky:1" --store "$STORE" --chunk-size 8388608
faults=$(python3 -c 'import json,sys,collections; c=collections.Counter(json.loads(l)["fault"] for l in open(sys.argv[1])); print(" ".join(f"{k}={v}" for k,v in sorted(c.items(), key=str)))' "$TMP/faults.jsonl")
say "requests by fault: $faults"
grep -q "cut=" <<<"$faults" || fail "the proxy cut no connection (the test proves nothing)"
grep -q "429=" <<<"$faults" || fail "the proxy sent no 429"
grep -q "500=" <<<"$faults" || fail "the proxy sent no 500"

check "large blobs resumed, never restarted; blob bytes forwarded stay close to the image's size"
summary=$(grep "^blobs:" "$TMP/push.err")
say "$summary"
bigline=$(grep "^\[done\] blob .* 96.0 MiB:" "$TMP/push.err") || { show_output push; fail "no line for the large blob"; }
say "$bigline"
grep -q "resumed" <<<"$bigline" || { show_output push; fail "the large blob was never resumed"; }
! grep -q "restarted" <<<"$bigline" || { show_output push; fail "the large blob was started again"; }
sent=$(blob_bytes "$TMP/faults.jsonl")
say "blob bytes the registry received: $sent (largest layer $BIG)"
python3 -c 'import sys; s,b=int(sys.argv[1]),int(sys.argv[2]); sys.exit(0 if s <= b * 1.15 + (1<<20) else 1)' "$sent" "$BIG" ||
  fail "the registry received $sent blob bytes for a $BIG byte layer: blobs were sent again"

check "the registry holds exactly the image (skopeo copy straight from it, every blob compared)"
[[ "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://127.0.0.1:$REG_PORT/flaky:1")" == "sha256:$M" ]] ||
  fail "the registry has another manifest"
skopeo copy -q --src-tls-verify=false "docker://127.0.0.1:$REG_PORT/flaky:1" "oci:$TMP/back:1" >/dev/null
for f in "$LAYOUT"/blobs/sha256/*; do
  cmp -s "$f" "$TMP/back/blobs/sha256/$(basename "$f")" || fail "blob $(basename "$f") differs in the registry"
done

check "cuts that deliver part of a chunk (stream mode): the push still completes and the content is right"
start_proxy "$REG_PORT" "$TMP/stream.jsonl" --seed 7 --rate 0.25 --cut-mode stream --max-faults 12
expect_ok push2 sb push "$LAYOUT:1" "127.0.0.1:$PROXY_PORT/flaky2:1" --store "$TMP/store2" --chunk-size 8388608
say "$(grep "^blobs:" "$TMP/push2.err")"
skopeo copy -q --src-tls-verify=false "docker://127.0.0.1:$REG_PORT/flaky2:1" "oci:$TMP/back2:1" >/dev/null
[[ "$(manifest_digest "$TMP/back2" 1)" == "$M" ]] || fail "flaky2 holds another manifest"
for f in "$LAYOUT"/blobs/sha256/*; do
  cmp -s "$f" "$TMP/back2/blobs/sha256/$(basename "$f")" || fail "blob $(basename "$f") differs in flaky2"
done
pass
