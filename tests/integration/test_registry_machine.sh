#!/usr/bin/env bash
# The machine's own registry settings, the files skopeo, podman and buildah
# read, against real registries (distribution 2.8) and skopeo on the same files:
#  - registries.conf: a name remapped to another registry, mirrors tried in
#    order (a dead one skipped), blocked names, a broken file named with its line;
#  - policy.json: a rejected name, and one that wants a signature;
#  - the auth file `skopeo login` writes, used for push and pull;
#  - certs.d: a registry's CA and the client certificate it demands.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo

image_fixture "$TMP/img" 1
LAYOUT="$TMP/img/layout"
M=$(manifest_digest "$LAYOUT" 1)
# Nothing of this machine's own settings: a home and a root of our own.
export HOME="$TMP/home" XDG_RUNTIME_DIR="$TMP/run"
export STACKBUILD_CONTAINERS_ROOT="$TMP/root"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$STACKBUILD_CONTAINERS_ROOT"
digest_of() {  # the digest of the manifest skopeo gets for $1 (--raw: no tag list, which asks only the primary)
  local raw
  raw=$(skopeo --registries-conf "$CONF" inspect --raw "docker://$1") || return 1
  printf 'sha256:%s' "$(printf '%s' "$raw" | sha256sum | cut -d' ' -f1)"
}

check "registries.conf: a remapped name, and mirrors in order, the same as skopeo"
start_registry primary
P="127.0.0.1:$REG_PORT"
start_registry mirror
MI="127.0.0.1:$REG_PORT"
DEAD="127.0.0.1:$(free_port)"  # nothing listens there
expect_ok seed1 sb push "$LAYOUT:1" "$MI/cache/team/app:1" --store "$STORE"
expect_ok seed2 sb push "$LAYOUT:1" "$P/team/app:2" --store "$STORE"
CONF="$TMP/registries.conf"
cat >"$CONF" <<TOML
no-such-setting = true

[[registry]]
prefix = "registry.invalid/team"
location = "$P/team"
insecure = true

[[registry.mirror]]
location = "$DEAD/cache"
insecure = true

[[registry.mirror]]
location = "$MI/cache/team"
insecure = true

[[registry]]
location = "$MI/blocked"
blocked = true
TOML
export CONTAINERS_REGISTRIES_CONF="$CONF"
# skopeo finds :1 on the second mirror and :2 at the remapped primary; so must we.
[[ "$(digest_of registry.invalid/team/app:1)" == "sha256:$M" ]] || fail "skopeo did not take the mirror"
expect_ok mirrored sb pull registry.invalid/team/app:1 "$TMP/mirrored:m" --store "$TMP/s1"
[[ "$(manifest_digest "$TMP/mirrored" m)" == "$M" ]] ||
  { show_output mirrored; fail "the mirrored pull has the wrong manifest"; }
grep -q "pull from $DEAD/cache/app (a mirror of registry.invalid/team/app).*trying the next place" "$TMP/mirrored.err" ||
  { show_output mirrored; fail "the dead mirror was not reported and skipped"; }
grep -q "pull from $MI/cache/team/app (a mirror of registry.invalid/team/app)" "$TMP/mirrored.err" ||
  { show_output mirrored; fail "no word of the mirror used"; }
[[ $(grep -c "registries.conf $CONF:1: 'no-such-setting' is not a setting stackbuild knows; ignored" "$TMP/mirrored.err") == 1 ]] ||
  { show_output mirrored; fail "an unknown setting was not warned about, once"; }
grep -q '"/v2/team/app/manifests' "$TMP/primary/log" 2>/dev/null && fail "the primary was asked though a mirror had the image"
[[ "$(digest_of registry.invalid/team/app:2)" == "sha256:$M" ]] || fail "skopeo did not take the remapped primary"
expect_ok remapped sb pull registry.invalid/team/app:2 "$TMP/remapped" --store "$TMP/s2"
grep -q "pull from $P/team/app (for registry.invalid/team/app)" "$TMP/remapped.err" ||
  { show_output remapped; fail "the remapped pull did not go to $P"; }
# --dry-run says the same without fetching.
expect_ok dry sb pull registry.invalid/team/app:1 --dry-run
cat >"$TMP/dry.want" <<TXT
registries.conf: $CONF
policy.json: none
1. $DEAD/cache/app:1 (mirror) (insecure)
   TLS: not verified
   credentials: none (anonymous)
2. $MI/cache/team/app:1 (mirror) (insecure)
   TLS: not verified
   credentials: none (anonymous)
3. $P/team/app:1 (insecure)
   TLS: not verified
   credentials: none (anonymous)
TXT
diff "$TMP/dry.want" "$TMP/dry.out" || { show_output dry; fail "pull --dry-run does not list the places in order"; }
# No place has it: the primary's error, with what the mirrors said.
expect_rc 1 nowhere sb pull registry.invalid/team/app:3 "$TMP/nowhere" --store "$TMP/s3"
grep -q "error: pull from $P/team/app (for registry.invalid/team/app): 404 manifest unknown.*(the mirrors failed too: pull from $DEAD/cache/app" \
  "$TMP/nowhere.err" || { show_output nowhere; fail "no clear error when no place has the image"; }
[[ ! -e "$TMP/nowhere" ]] || fail "a failed pull left its layout behind"

check "registries.conf: a recipe from: the remapped name builds through the mirror; the lock keeps the name"
mkdir -p "$TMP/app/files"
echo app >"$TMP/app/files/app.txt"
cat >"$TMP/app/recipe.yaml" <<YAML
stack: app
from: registry.invalid/team/app:1
source_date_epoch: 2000
layers:
  - {name: app, copy: [{src: files/app.txt, dst: /app/app.txt}]}
tags: ["app:1"]
YAML
expect_ok frombuild sb build "$TMP/app/recipe.yaml" -o "$TMP/app/out" --store "$TMP/s9" --compression gzip --level 1
grep -q "base: registry.invalid/team/app@sha256:$M" "$TMP/frombuild.err" || { show_output frombuild; fail "the base was not pulled by its name"; }
expect_ok fromlock sb lock "$TMP/app/recipe.yaml" --store "$TMP/s9"
[[ "$(json "$TMP/app/recipe.yaml.lock" 'j["points"][0]["base"]["digest"]')" == "sha256:$M" ]] ||
  { cat "$TMP/app/recipe.yaml.lock" >&2; fail "the lock does not pin the base's digest"; }
grep -q "registry.invalid/team/app" "$TMP/app/recipe.yaml.lock" || fail "the lock does not keep the base's name"
! grep -q "127.0.0.1" "$TMP/app/recipe.yaml.lock" || fail "the lock names the mirror"

check "registries.conf: a blocked name is refused for pull and push, as skopeo refuses it"
expect_ok seed3 sb push "$LAYOUT:1" "$MI/open/app:1" --store "$STORE"
! digest_of "$MI/blocked/app:1" >/dev/null 2>"$TMP/skopeo-blocked.err" || fail "skopeo pulled a blocked name"
expect_rc 1 blocked sb pull "$MI/blocked/app:1" "$TMP/blocked" --store "$TMP/s4"
grep -q "error: pull from $MI/blocked/app: $MI/blocked/app is blocked by the registry table with prefix '$MI/blocked' in $CONF" \
  "$TMP/blocked.err" || { show_output blocked; fail "no clear error for a blocked pull"; }
expect_rc 1 blockedpush sb push "$LAYOUT:1" "$MI/blocked/app:1" --store "$STORE"
grep -q "error: push to $MI/blocked/app: .*is blocked" "$TMP/blockedpush.err" || { show_output blockedpush; fail "a blocked push went out"; }
expect_ok openpull sb pull "$MI/open/app:1" "$TMP/open" --store "$TMP/s4"

check "registries.conf: a broken drop-in is an error naming its file and line, for pulls only"
mkdir -p "$STACKBUILD_CONTAINERS_ROOT/etc/containers/registries.conf.d"
printf '[[registry]]\nlocation = "%s/x"\ninsecure = "yes"\n' "$MI" >"$STACKBUILD_CONTAINERS_ROOT/etc/containers/registries.conf.d/50-bad.conf"
expect_rc 1 broken sb pull "$MI/open/app:1" "$TMP/broken" --store "$TMP/s5"
grep -q "error: pull from $MI/open/app: registries.conf .*/50-bad.conf:3: insecure must be true or false" "$TMP/broken.err" ||
  { show_output broken; fail "no clear error for a broken drop-in"; }
# A build that pulls nothing does not read it.
expect_ok nopull sb build "$TMP/img/src/recipe.yaml" -o "$TMP/rebuilt" --store "$STORE" --compression gzip --level 1
rm "$STACKBUILD_CONTAINERS_ROOT/etc/containers/registries.conf.d/50-bad.conf"

check "policy.json: a rejected name is refused, as skopeo copy refuses it; one that wants a signature says what to do"
POLICY="$STACKBUILD_CONTAINERS_ROOT/etc/containers/policy.json"
cat >"$POLICY" <<JSON
{"default": [{"type": "insecureAcceptAnything"}],
 "transports": {"docker": {"$MI/open": [{"type": "reject"}],
                           "$MI/signed": [{"type": "sigstoreSigned", "keyPath": "$TMP/cosign.pub"}]}}}
JSON
! skopeo --policy "$POLICY" --registries-conf "$CONF" copy --src-tls-verify=false "docker://$MI/open/app:1" "oci:$TMP/sk-open:1" \
  >/dev/null 2>&1 || fail "skopeo copied a rejected name"
expect_rc 1 rejected sb pull "$MI/open/app:1" "$TMP/rejected" --store "$TMP/s10"
grep -q "error: pull from $MI/open/app: policy.json $POLICY rejects $MI/open/app:1 (scope \"$MI/open\": reject)" \
  "$TMP/rejected.err" || { show_output rejected; fail "no clear error for a name policy.json rejects"; }
# --insecure-policy, as skopeo's, pulls it anyway.
skopeo --insecure-policy --registries-conf "$CONF" copy --src-tls-verify=false "docker://$MI/open/app:1" "oci:$TMP/sk-open:1" \
  >/dev/null 2>&1 || fail "skopeo --insecure-policy refused"
expect_ok insecurepolicy sb pull "$MI/open/app:1" "$TMP/insecure-policy" --store "$TMP/s10" --insecure-policy
skopeo --policy "$POLICY" --registries-conf "$CONF" copy --src-tls-verify=false "docker://$MI/cache/team/app:1" \
  "oci:$TMP/sk-ok:1" >/dev/null 2>&1 || fail "skopeo refused a name the policy accepts"
expect_ok accepted sb pull "$MI/cache/team/app:1" "$TMP/accepted" --store "$TMP/s10"
expect_rc 1 unsigned sb pull "$MI/signed/app:1" "$TMP/unsigned" --store "$TMP/s10"
grep -q "wants $MI/signed/app:1 signed (scope \"$MI/signed\": sigstoreSigned), and stackbuild does not verify image signatures; copy it with skopeo copy docker://$MI/signed/app:1 oci:DIR:TAG" \
  "$TMP/unsigned.err" || { show_output unsigned; fail "no clear error for a name policy.json wants signed"; }
rm "$POLICY"
unset CONTAINERS_REGISTRIES_CONF

check "auth files: what skopeo login wrote is used for push and pull; no password in any output"
PASS_WORD="machine-Pa55-$RANDOM"
start_registry basic htpasswd alice "$PASS_WORD"
B="127.0.0.1:$REG_PORT"
expect_rc 1 noauth sb push "$LAYOUT:1" "$B/app:1" --store "$STORE"
skopeo login --tls-verify=false -u alice -p "$PASS_WORD" "$B" >"$TMP/login.out" 2>&1 || { cat "$TMP/login.out"; fail "skopeo login"; }
[[ -s "$XDG_RUNTIME_DIR/containers/auth.json" ]] || fail "skopeo login wrote no $XDG_RUNTIME_DIR/containers/auth.json"
expect_ok authpush sb push "$LAYOUT:1" "$B/app:1" --store "$STORE" -v
expect_ok authdry sb pull "$B/app:1" --dry-run
grep -qx "   credentials: from $XDG_RUNTIME_DIR/containers/auth.json" "$TMP/authdry.out" || { show_output authdry; fail "--dry-run does not name the auth file"; }
expect_ok authpull sb pull "$B/app:1" "$TMP/authpulled" --store "$TMP/s6"
# REGISTRY_AUTH_FILE takes that file's place; a wrong login there is named in the 401.
printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$B" "$(printf 'alice:wrong' | base64 -w0)" >"$TMP/ci-auth.json"
REGISTRY_AUTH_FILE="$TMP/ci-auth.json" expect_rc 1 wrongfile sb push "$LAYOUT:1" "$B/app:2" --store "$STORE"
grep -q "401 unauthorized.*(credentials from $TMP/ci-auth.json)" "$TMP/wrongfile.err" ||
  { show_output wrongfile; fail "the 401 does not name the auth file"; }
# A broken auth file is an error naming it and the push it stopped.
mkdir -p "$HOME/.config/containers"
echo '{"auths": ' >"$HOME/.config/containers/auth.json"
REGISTRY_AUTH_FILE="$TMP/none.json" expect_rc 1 brokenauth sb push "$LAYOUT:1" "$B/app:3" --store "$STORE"
grep -q "error: push to $B/app: ~/.config/containers/auth.json is not valid JSON" "$TMP/brokenauth.err" ||
  { show_output brokenauth; fail "no clear error for a broken auth file"; }
rm "$HOME/.config/containers/auth.json"
for n in noauth authpush authdry authpull wrongfile; do
  ! grep -q "$PASS_WORD" "$TMP/$n.out" "$TMP/$n.err" || fail "$n printed the password"
done

check "certs.d: the registry's CA and the client certificate it demands, as skopeo reads them"
start_registry mtls mtls
T="127.0.0.1:$REG_PORT"
CERTS="$STACKBUILD_CONTAINERS_ROOT/etc/containers/certs.d/$T"
mkdir -p "$CERTS"
cp "$REG_DIR/ca/ca.pem" "$CERTS/ca.crt"
expect_rc 1 nocert sb push "$LAYOUT:1" "$T/app:1" --store "$STORE"
grep -q "error: push to $T/app: $T refused the TLS connection for want of a client certificate it accepts.*put one and its key in /etc/containers/certs.d/$T/ as client.cert and client.key" \
  "$TMP/nocert.err" || { show_output nocert; fail "no clear error without a client certificate"; }
make_client_cert "$REG_DIR/ca" "$CERTS"
expect_ok certpush sb push "$LAYOUT:1" "$T/app:1" --store "$STORE"
[[ "$(skopeo inspect --cert-dir "$CERTS" --format '{{.Digest}}' "docker://$T/app:1")" == "sha256:$M" ]] ||
  fail "skopeo with the same certs.d sees another digest"
expect_ok certpull sb pull "$T/app:1" "$TMP/certpulled" --store "$TMP/s7"
expect_ok certdry sb pull "$T/app:1" --dry-run
grep -qx "   TLS: certs.d $CERTS: 1 CA file(s), client certificate client.cert" "$TMP/certdry.out" ||
  { show_output certdry; fail "--dry-run does not show the certs.d files"; }
# A certificate from another CA is refused, and the error names it.
make_ca "$TMP/otherca"
make_client_cert "$TMP/otherca" "$TMP/othercert"
cp "$CERTS/client.cert" "$TMP/good.cert" && cp "$TMP/othercert/client.cert" "$CERTS/client.cert"
cp "$CERTS/client.key" "$TMP/good.key" && cp "$TMP/othercert/client.key" "$CERTS/client.key"
expect_rc 1 othercert sb pull "$T/app:1" "$TMP/otherpulled" --store "$TMP/s7"
grep -q "refused the TLS connection for want of a client certificate it accepts.*it did not accept $CERTS/client.cert" \
  "$TMP/othercert.err" || { show_output othercert; fail "no clear error for a client certificate it does not accept"; }
cp "$TMP/good.cert" "$CERTS/client.cert" && cp "$TMP/good.key" "$CERTS/client.key"
mv "$CERTS/client.key" "$CERTS/client.key.off"
expect_rc 1 nokey sb pull "$T/app:1" "$TMP/nokey" --store "$TMP/s8"
grep -q "certs.d: $CERTS/client.cert is a client certificate without its key client.key" "$TMP/nokey.err" ||
  { show_output nokey; fail "no clear error for a certificate without its key"; }
say "mirror, remap, block, auth file and client certificate all as skopeo reads them"
pass
