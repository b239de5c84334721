#!/usr/bin/env bash
# skopeo verifies what `stackbuild sign` signs (issue 34): its policy.json
# entry of type sigstoreSigned (with registries.d's use-sigstore-attachments)
# accepts the signed image, and refuses another key and an image pushed over
# the signed tag. Skipped where skopeo was built without sigstore (Debian
# 12's skopeo 1.9.3 says "Debian-local change: sigstore disabled"), never
# passed there. SB_SKOPEO=COMMAND runs another skopeo (tests/e2e/
# test_sign_skopeo_trixie.sh gives it Debian 13's, which checks sigstore).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sign_lib.sh
source "$HERE/sign_lib.sh"

# skopeo's view: a policy that takes only images sigstore-signed by KEY, and
# registries.d telling it to look for sigstore signatures on this registry.
mkdir -p "$TMP/registries.d"
printf 'docker:\n  %s:\n    use-sigstore-attachments: true\n' "$REG" >"$TMP/registries.d/local.yaml"
policy() {  # policy KEY.pub
  cat >"$TMP/policy.json" <<JSON
{"default": [{"type": "reject"}],
 "transports": {"docker": {"$REG/team/app": [{"type": "sigstoreSigned", "keyPath": "$1",
                                              "signedIdentity": {"type": "matchRepoDigestOrExact"}}]}}}
JSON
}
skopeo=${SB_SKOPEO:-skopeo}
skopeo_copy() {  # skopeo_copy NAME: copy the signed image under the policy
  # --remove-signatures: an oci: layout takes none; the policy is checked on the source all the same.
  run_capture "$1" "$skopeo" --policy "$TMP/policy.json" --registries.d "$TMP/registries.d" copy --remove-signatures \
    --src-tls-verify=false "docker://$REG/team/app:1" "oci:$TMP/copy-$1:1"
}

refused_for_signature() {  # NAME: skopeo's refusal was its signature policy's, not another failure
  grep -qi "signature" "$TMP/$1.err" || { show_output "$1"; fail "skopeo failed, but not for a signature"; }
  say "skopeo ($1): $(grep -io 'msg=.*' "$TMP/$1.err" | head -1)"
}

check "before signing, skopeo's policy refuses the image"
policy "$TMP/key.pub"
skopeo_copy unsigned
[[ $RC != 0 ]] || fail "skopeo copied an unsigned image under a sigstoreSigned policy"
refused_for_signature unsigned

check "stackbuild sign, then stackbuild verify and skopeo's sigstoreSigned policy accept the image"
expect_ok sign sb sign "$REG/team/app:1" --key "$TMP/key.pem" --insecure-registry "$REG"
expect_ok verify sb verify "$REG/team/app:1" --key "$TMP/key.pub" --insecure-registry "$REG"
grep -q "verified $REG/team/app:1" "$TMP/verify.out" "$TMP/verify.err" || { show_output verify; fail "verify said nothing"; }
skopeo_copy signed
if [[ $RC != 0 ]] && grep -q "sigstore disabled" "$TMP/signed.err"; then
  skip "this skopeo ($("$skopeo" --version)) was built without sigstore: it cannot check the signatures"
fi
[[ $RC == 0 ]] || { show_output signed; fail "skopeo refused what stackbuild signed"; }

check "another key: stackbuild verify exits 3 and skopeo refuses"
expect_rc 3 verify_other sb verify "$REG/team/app:1" --key "$TMP/other.pub" --insecure-registry "$REG"
grep -q "not signed by" "$TMP/verify_other.err" || { show_output verify_other; fail "verify did not say why"; }
policy "$TMP/other.pub"
skopeo_copy other
[[ $RC != 0 ]] || fail "skopeo accepted a signature by another key"
refused_for_signature other

check "an image pushed over the signed tag is refused by both"
policy "$TMP/key.pub"
echo two >"$R/a.txt"
expect_ok build2 sb build "$R/r.yaml" -o "$TMP/out2" --store "$STORE"
expect_ok push2 sb push "$TMP/out2:1" "$REG/team/app:1" --store "$STORE" --insecure-registry "$REG"
expect_rc 3 verify_swapped sb verify "$REG/team/app:1" --key "$TMP/key.pub" --insecure-registry "$REG"
grep -q "has no signature" "$TMP/verify_swapped.err" || { show_output verify_swapped; fail "not the unsigned error"; }
skopeo_copy swapped
[[ $RC != 0 ]] || fail "skopeo accepted the image pushed over the signed tag"
refused_for_signature swapped

check "the other way round: skopeo signs (a key of its own generate-sigstore-key) and stackbuild verify accepts it"
printf 'pass' >"$TMP/passphrase"
run_capture genkey "$skopeo" generate-sigstore-key --output-prefix "$TMP/skopeo-key" --passphrase-file "$TMP/passphrase"
[[ $RC == 0 ]] || { show_output genkey; fail "skopeo generate-sigstore-key"; }
run_capture skopeo_sign "$skopeo" --registries.d "$TMP/registries.d" copy --src-tls-verify=false --dest-tls-verify=false \
  --sign-by-sigstore-private-key "$TMP/skopeo-key.private" --sign-passphrase-file "$TMP/passphrase" \
  "docker://$REG/team/app:1" "docker://$REG/team/app:2"
[[ $RC == 0 ]] || { show_output skopeo_sign; fail "skopeo copy --sign-by-sigstore-private-key"; }
expect_ok verify_skopeo sb verify "$REG/team/app:2" --key "$TMP/skopeo-key.pub" --insecure-registry "$REG"
expect_rc 3 verify_skopeo_other sb verify "$REG/team/app:2" --key "$TMP/key.pub" --insecure-registry "$REG"
pass
