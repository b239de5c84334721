#!/usr/bin/env bash
# Registry auth and TLS against the real registry (distribution 2.8): TLS with a CA
# made here (untrusted without --ca-cert), htpasswd basic auth (--creds, environment,
# ~/.docker/config.json and a credential helper), and the bearer token flow with a
# token server whose tokens expire within a push. Wrong credentials and an untrusted
# certificate give a clear error and exit 1; no password ever shows in any output.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo

PASS_WORD="s3cret-Pa55-$RANDOM"
image_fixture "$TMP/img" 4
LAYOUT="$TMP/img/layout"
M=$(manifest_digest "$LAYOUT" 1)
no_password() {  # no_password NAME...: the captured outputs never show the password
  local n
  for n in "$@"; do
    ! grep -q "$PASS_WORD" "$TMP/$n.out" "$TMP/$n.err" || { show_output "$n"; fail "$n printed the password"; }
  done
}

check "TLS: an untrusted certificate is a clear error; --ca-cert makes it work"
start_registry tls tls
CA="$REG_DIR/ca/ca.pem"
T="127.0.0.1:$REG_PORT"
expect_rc 1 untrusted sb push "$LAYOUT:1" "$T/app:1" --store "$STORE"
grep -q "error: push to $T/app: the TLS certificate of $T is not trusted" "$TMP/untrusted.err" ||
  { show_output untrusted; fail "no clear error for an untrusted certificate"; }
expect_ok tlspush sb push "$LAYOUT:1" "$T/app:1" --store "$STORE" --ca-cert "$CA"
[[ "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$T/app:1")" == "sha256:$M" ]] || fail "TLS push: wrong digest"
expect_ok tlspull sb pull "$T/app:1" "$TMP/tlspulled" --store "$TMP/s2" --ca-cert "$CA"
# A CA file that holds no certificate: an error naming it, not a TLS failure.
echo "not a certificate" > "$TMP/bad.pem"
expect_rc 1 badca sb pull "$T/app:1" "$TMP/badpulled" --store "$TMP/s3" --ca-cert "$TMP/bad.pem"
grep -q "error: pull from $T/app: .*cannot read the CA certificates in $TMP/bad.pem" "$TMP/badca.err" ||
  { show_output badca; fail "no clear error for a CA file without a certificate"; }

check "htpasswd: wrong credentials are a clear 401, without the password"
start_registry basic htpasswd alice "$PASS_WORD"
B="127.0.0.1:$REG_PORT"
expect_rc 1 wrong sb push "$LAYOUT:1" "$B/app:1" --store "$STORE" --creds "alice:not-$PASS_WORD" -v
grep -q "error: push to $B/app: 401 unauthorized.*(credentials from --creds)" "$TMP/wrong.err" ||
  { show_output wrong; fail "no clear 401"; }
expect_rc 1 anon sb push "$LAYOUT:1" "$B/app:1" --store "$STORE"
grep -q "401 unauthorized.*no credentials" "$TMP/anon.err" || { show_output anon; fail "no clear error without credentials"; }

check "htpasswd: --creds, the environment, ~/.docker/config.json and a credential helper all work"
expect_ok basic1 sb push "$LAYOUT:1" "$B/app:1" --store "$STORE" --creds "alice:$PASS_WORD" -v
STACKBUILD_REGISTRY_USER=alice STACKBUILD_REGISTRY_PASSWORD=$PASS_WORD expect_ok basic2 \
  sb push "$LAYOUT:1" "$B/app:2" --store "$STORE" -v
mkdir -p "$TMP/home/.docker" "$TMP/bin"
printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$B" "$(printf 'alice:%s' "$PASS_WORD" | base64 -w0)" >"$TMP/home/.docker/config.json"
HOME="$TMP/home" expect_ok basic3 sb pull "$B/app:2" "$TMP/bpulled" --store "$TMP/s3" -v
cat >"$TMP/bin/docker-credential-sbtest" <<SH
#!/bin/sh
read -r server
[ "\$1" = get ] && [ "\$server" = "$B" ] || { echo "credentials not found in native keychain"; exit 1; }
printf '{"ServerURL":"%s","Username":"alice","Secret":"%s"}\n' "\$server" "$PASS_WORD"
SH
chmod +x "$TMP/bin/docker-credential-sbtest"
printf '{"credsStore":"sbtest"}\n' >"$TMP/home/.docker/config.json"
HOME="$TMP/home" PATH="$TMP/bin:$PATH" expect_ok basic4 sb push "$LAYOUT:1" "$B/app:4" --store "$STORE" -v
grep -q "GET http://$B/v2/ -> 401" "$TMP/basic4.err" || { show_output basic4; fail "--verbose shows no requests"; }
no_password wrong anon basic1 basic2 basic3 basic4

check "token flow: tokens that expire within the push are renewed; mounts ask for pull on the source"
# The token server here is plain http: credentials go to such a realm only for a registry
# marked insecure (test_registry_hostile.sh checks the refusal), so each run marks it.
start_token_server alice "$PASS_WORD" 1.5
start_registry token token "http://127.0.0.1:$TOKEN_PORT/token" "$TOKEN_CERT"
K="127.0.0.1:$REG_PORT"
start_proxy "$REG_PORT" "$TMP/slow.jsonl" --seed 3 --rate 0.35 --max-faults 10
expect_ok tok1 sb push "$LAYOUT:1" "127.0.0.1:$PROXY_PORT/team/app:1" --store "$STORE" -j 1 -v \
  --creds "alice:$PASS_WORD" --chunk-size 1048576 --insecure-registry "127.0.0.1:$PROXY_PORT"
tokens=$(grep -c '"event": "token"' "$TOKEN_LOG")
say "tokens issued for one push: $tokens; 401s: $(grep -c '"status": 401' "$TMP/slow.jsonl" || true)"
[[ $tokens -ge 2 ]] || { show_output tok1; fail "the push never renewed its token"; }
[[ "$(skopeo inspect --tls-verify=false --creds "alice:$PASS_WORD" --format '{{.Digest}}' "docker://$K/team/app:1")" == "sha256:$M" ]] ||
  fail "token push: wrong digest"
expect_ok tok2 sb push "$LAYOUT:1" "127.0.0.1:$PROXY_PORT/team/copy:1" --store "$STORE" --creds "alice:$PASS_WORD" \
  --insecure-registry "127.0.0.1:$PROXY_PORT"
grep -q "3 mounted" "$TMP/tok2.err" || { show_output tok2; fail "no mount under token auth"; }
grep -q 'repository:team/app:pull"' "$TOKEN_LOG" || fail "no pull scope asked for the mount source"
expect_rc 1 tokwrong sb push "$LAYOUT:1" "$K/team/app:1" --store "$STORE" --creds "alice:nope" --insecure-registry "$K"
grep -q "error: push to $K/team/app: 401 unauthorized: invalid username or password (credentials from --creds)" \
  "$TMP/tokwrong.err" || { show_output tokwrong; fail "no clear error for wrong credentials at the token server"; }
no_password tok1 tok2 tokwrong

check "identity tokens: docker config's identitytoken and a helper's <token> go to the token server's OAuth2 POST"
REFRESH="refresh-$RANDOM-$RANDOM-token"
start_token_server alice "$PASS_WORD" 300 --refresh-token "$REFRESH"
start_registry oauth token "http://127.0.0.1:$TOKEN_PORT/token" "$TOKEN_CERT"
O="127.0.0.1:$REG_PORT"
mkdir -p "$TMP/ohome/.docker"
identity_config() {  # identity_config TOKEN: a docker config as `docker login` writes it for an identity token
  printf '{"auths":{"%s":{"auth":"%s","identitytoken":"%s"}}}\n' "$O" \
    "$(printf '00000000-0000-0000-0000-000000000000:' | base64 -w0)" "$1" >"$TMP/ohome/.docker/config.json"
}
identity_config "$REFRESH"
HOME="$TMP/ohome" expect_ok oauth1 sb push "$LAYOUT:1" "$O/team/app:1" --store "$STORE" -v --insecure-registry "$O"
grep -q "POST http://127.0.0.1:$TOKEN_PORT/token (token, OAuth2 refresh token) -> 200" "$TMP/oauth1.err" ||
  { show_output oauth1; fail "the identity token was not traded with a POST"; }
grep -q '"event": "oauth", "client_id": "stackbuild"' "$TOKEN_LOG" || fail "the token server saw no OAuth2 request"
# containers/image reads the same file the same way: skopeo sees the pushed image.
[[ "$(skopeo inspect --authfile "$TMP/ohome/.docker/config.json" --tls-verify=false --format '{{.Digest}}' \
  "docker://$O/team/app:1" 2>"$TMP/skopeo-oauth.err")" == "sha256:$M" ]] ||
  fail "skopeo with the same identity token sees another digest: $(cat "$TMP/skopeo-oauth.err"; tail -3 "$TOKEN_LOG")"
cat >"$TMP/bin/docker-credential-sboauth" <<SH
#!/bin/sh
read -r server
printf '{"ServerURL":"%s","Username":"<token>","Secret":"%s"}\n' "\$server" "$REFRESH"
SH
chmod +x "$TMP/bin/docker-credential-sboauth"
printf '{"credsStore":"sboauth"}\n' >"$TMP/ohome/.docker/config.json"
HOME="$TMP/ohome" PATH="$TMP/bin:$PATH" expect_ok oauth2 sb pull "$O/team/app:1" "$TMP/opulled" --store "$TMP/s9" \
  --insecure-registry "$O"
identity_config "wrong-$REFRESH"
HOME="$TMP/ohome" expect_rc 1 oauthwrong sb push "$LAYOUT:1" "$O/team/app:2" --store "$STORE" --insecure-registry "$O"
grep -q "error: push to $O/team/app: 401 unauthorized: invalid refresh token (credentials from ~/.docker/config.json)" \
  "$TMP/oauthwrong.err" || { show_output oauthwrong; fail "no clear error for a refused identity token"; }
for n in oauth1 oauth2 oauthwrong; do
  ! grep -q "$REFRESH" "$TMP/$n.out" "$TMP/$n.err" || fail "$n printed the identity token"
done
pass
