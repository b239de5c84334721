#!/usr/bin/env bash
# Push and pull against the real registry (distribution 2.8, plain HTTP on 127.0.0.1),
# checked with skopeo: same manifest digest and layer bytes both ways; a second push
# sends no blob bytes (counted by a pass-through proxy) and takes under a second;
# mounts; an index over several images; a clear error for a missing repository.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo

image_fixture "$TMP/img" 24
LAYOUT="$TMP/img/layout"
M=$(manifest_digest "$LAYOUT" 1)
start_registry plain
R="127.0.0.1:$REG_PORT"

check "push (chunked: 4 MiB chunks) then skopeo inspect gives the layout's manifest digest"
expect_ok push sb push "$LAYOUT:1" "$R/app:1" --store "$STORE" --chunk-size 4194304
got=$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$R/app:1")
[[ "$got" == "sha256:$M" ]] || fail "skopeo sees $got, the layout has sha256:$M"

check "skopeo copy back to an OCI layout: the same manifest and the same layer bytes"
skopeo copy -q --src-tls-verify=false "docker://$R/app:1" "oci:$TMP/back:1" >/dev/null
[[ "$(manifest_digest "$TMP/back" 1)" == "$M" ]] || fail "skopeo copied back a different manifest"
for f in "$LAYOUT"/blobs/sha256/*; do
  cmp -s "$f" "$TMP/back/blobs/sha256/$(basename "$f")" || fail "blob $(basename "$f") differs after the round trip"
done

check "a second push through a counting proxy sends no blob bytes and takes under a second"
start_proxy "$REG_PORT" "$TMP/count.jsonl" --rate 0
start=$(date +%s.%N)
expect_ok push2 sb push "$LAYOUT:1" "127.0.0.1:$PROXY_PORT/app:1" --store "$STORE"
secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$start" "$(date +%s.%N)")
sent=$(blob_bytes "$TMP/count.jsonl")
say "second push: $sent blob bytes, $secs s"
[[ "$sent" == 0 ]] || fail "the second push sent $sent blob bytes"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1.0 else 1)" "$secs" || fail "the second push took $secs s"
grep -q "0 sent (0 B), 3 already there" "$TMP/push2.err" || { show_output push2; fail "no summary of skipped blobs"; }

check "a push to another repository of the same registry mounts the blobs"
expect_ok mount sb push "$LAYOUT:1" "$R/team/other:v1" --store "$STORE"
grep -q "3 mounted" "$TMP/mount.err" || { show_output mount; fail "the blobs were not mounted"; }
[[ "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$R/team/other:v1")" == "sha256:$M" ]] ||
  fail "the mounted image has another digest"

check "pull of an image pushed by skopeo: same manifest, verified blobs, into a fresh store"
skopeo copy -q --dest-tls-verify=false "oci:$LAYOUT:1" "docker://$R/fromskopeo:2" >/dev/null
SM=$(skopeo inspect --tls-verify=false --raw "docker://$R/fromskopeo:2" | sha256sum | cut -d' ' -f1)
expect_ok pull sb pull "$R/fromskopeo:2" "$TMP/pulled:two" --store "$TMP/store2"
[[ "$(manifest_digest "$TMP/pulled" two)" == "$SM" ]] || fail "the pulled manifest differs from skopeo's"
verify_blobs "$TMP/pulled"
skopeo inspect --format '{{.Digest}}' "oci:$TMP/pulled:two" >/dev/null || fail "skopeo cannot read the pulled layout"

check "pull pinned by digest"
expect_ok pulld sb pull "$R/app@sha256:$M" "$TMP/pinned:p" --store "$TMP/store2"
[[ "$(manifest_digest "$TMP/pinned" p)" == "$M" ]] || fail "the pinned pull wrote another manifest"

check "several images under one tag become an image index"
cp -a "$LAYOUT" "$TMP/multi"
expect_ok build2 sb build "$SB_SOURCE_DIR/examples/hello.yaml" -o "$TMP/multi" --store "$STORE"
expect_ok multi sb push "$TMP/multi" "$R/multi:all" --store "$STORE"
skopeo inspect --tls-verify=false --raw "docker://$R/multi:all" >"$TMP/index.json"
[[ "$(json "$TMP/index.json" 'j["mediaType"]')" == "application/vnd.oci.image.index.v1+json" ]] || fail "no index"
[[ "$(json "$TMP/index.json" 'len(j["manifests"])')" == 3 ]] || fail "the index does not list 3 manifests"
# Two images of linux/amd64 under one tag: pull names them rather than taking one.
expect_rc 1 pulli sb pull "$R/multi:all" "$TMP/fromindex" --store "$TMP/store2" --platform linux/amd64
grep -q "lists 2 images for linux/amd64" "$TMP/pulli.err" || { show_output pulli; fail "the ambiguity is not explained"; }
one=$(json "$TMP/index.json" 'j["manifests"][1]["digest"]')
expect_ok pull1 sb pull "$R/multi@$one" "$TMP/fromindex:one" --store "$TMP/store2"
# --all: both images (one listed twice), named by the tag and platform (no build tags here), and the index.
expect_ok pullall sb pull --all "$R/multi:all" "$TMP/fromall" --store "$TMP/store2"
[[ $(json "$TMP/fromall/index.json" 'len(j["manifests"])') == 3 ]] || fail "pull --all: not 2 images and the index"
[[ "$(manifest_digest "$TMP/fromall" all)" == "$(sha256sum "$TMP/index.json" | cut -d' ' -f1)" ]] ||
  fail "pull --all: the layout's index is not the registry's"
json "$TMP/fromall/index.json" '" ".join(sorted(m["annotations"]["org.opencontainers.image.ref.name"] for m in j["manifests"]))' |
  grep -Eq '^all all-linux-amd64 all-linux-amd64-[0-9a-f]{12}$' || fail "pull --all: the ref names"

check "a missing repository: a clear error and exit 1"
expect_rc 1 missing sb pull "$R/no/such/repo:1" "$TMP/none" --store "$STORE"
grep -Eq "error: pull from $R/no/such/repo: 404 (name|manifest) unknown" "$TMP/missing.err" ||
  { show_output missing; fail "no clear error for a missing repository"; }
pass
