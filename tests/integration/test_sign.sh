#!/usr/bin/env bash
# Signatures in the sigstore (cosign) format against the real registry
# (distribution 2.8, plain HTTP on 127.0.0.1), issue 34: `stackbuild sign`
# with a key pair made by OpenSSL writes cosign's sha256-<hex>.sig manifest;
# `stackbuild verify` accepts the image with that key, and refuses, exit 3,
# another key or an image pushed over the signed tag. skopeo's own check of
# the same signatures is test_sign_skopeo.sh.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sign_lib.sh
source "$HERE/sign_lib.sh"

check "stackbuild sign, then stackbuild verify accepts the image"
expect_ok sign sb sign "$REG/team/app:1" --key "$TMP/key.pem" --insecure-registry "$REG"
grep -q "signed $REG/team/app:1" "$TMP/sign.out" "$TMP/sign.err" || { show_output sign; fail "sign said nothing"; }
expect_ok verify sb verify "$REG/team/app:1" --key "$TMP/key.pub" --insecure-registry "$REG"
grep -q "verified $REG/team/app:1" "$TMP/verify.out" "$TMP/verify.err" || { show_output verify; fail "verify said nothing"; }
skopeo inspect --tls-verify=false --raw "docker://$REG/team/app:sha256-$(manifest_digest "$TMP/out" 1).sig" >"$TMP/sig.json" ||
  fail "no sha256-<hex>.sig manifest in the registry"
python3 - "$TMP/sig.json" <<'PY' || fail "the signature manifest is not cosign's: $(cat "$TMP/sig.json")"
import json, sys
m = json.load(open(sys.argv[1]))
(l,) = m["layers"]
assert l["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json", l
assert l["annotations"]["dev.cosignproject.cosign/signature"], l
PY

check "another key: stackbuild verify exits 3 saying why"
expect_rc 3 verify_other sb verify "$REG/team/app:1" --key "$TMP/other.pub" --insecure-registry "$REG"
grep -q "not signed by" "$TMP/verify_other.err" || { show_output verify_other; fail "verify did not say why"; }

check "an image pushed over the signed tag has no signature"
echo two >"$R/a.txt"
expect_ok build2 sb build "$R/r.yaml" -o "$TMP/out2" --store "$STORE"
expect_ok push2 sb push "$TMP/out2:1" "$REG/team/app:1" --store "$STORE" --insecure-registry "$REG"
expect_rc 3 verify_swapped sb verify "$REG/team/app:1" --key "$TMP/key.pub" --insecure-registry "$REG"
grep -q "has no signature" "$TMP/verify_swapped.err" || { show_output verify_swapped; fail "not the unsigned error"; }
pass
