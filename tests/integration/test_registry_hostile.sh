#!/usr/bin/env bash
# Registry credentials stay with the registry's origin, and registry documents are
# capped (DESIGN.md, "Trust boundary"), against registry/hostile_registry.py: a fake
# registry on 127.0.0.1 that sends blob uploads and blob GETs to a "foreign" origin
# (another port) that records every Authorization header it gets.
#   - push: the upload's Location is foreign; no credentials go there (the push works);
#   - pull: blob GETs redirect to the foreign origin; no credentials go there (it works);
#   - a 401 from the foreign origin (a Bearer challenge with a foreign realm) sends no
#     credentials anywhere foreign;
#   - the registry's own Bearer challenge with a plain-http realm on another port: Basic
#     credentials are not sent there (a clear error naming --insecure-registry), and
#     are with --insecure-registry;
#   - an error body that quotes the Authorization header shows no secret;
#   - the sentinel password, and its base64 forms, appear in no output of any run
#     (push, pull, build --push; failing runs; -v; --progress json);
#   - a 1 GiB manifest body (streamed, no length) is refused at the 4 MiB cap naming
#     STACKBUILD_REGISTRY_MAX_DOCUMENT, quickly and without holding it in memory;
#   - a build cache's tag list whose next page is on the foreign origin: that page is
#     never asked for (a warning names it) and the cache's index is read alone.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=registry/lib.sh
source "$HERE/registry/lib.sh"

USER_NAME=alice
PASS_WORD="SENTINEL-PASSWORD-8472"
SECRETS=("$PASS_WORD" "$(printf '%s' "$PASS_WORD" | base64 -w0)" "$(printf '%s:%s' "$USER_NAME" "$PASS_WORD" | base64 -w0)")
image_fixture "$TMP/img" 1
LAYOUT="$TMP/img/layout"
RUNS=()

# start_hostile NAME [hostile_registry.py options]: sets R (registry host:port), F (the
# foreign origin's port) and LOG.
start_hostile() {
  local d="$TMP/$1"
  mkdir -p "$d"
  LOG="$d/log.jsonl"
  : >"$LOG"
  python3 "$REG_HERE/hostile_registry.py" --port-file "$d/port" --log "$LOG" --user "$USER_NAME" \
    --password "$PASS_WORD" "${@:2}" 2>"$d/stderr" &
  REG_PIDS+=($!)
  local ports
  ports=$(wait_port_file "$d/port")
  R="127.0.0.1:${ports% *}"
  F="${ports#* }"
}
# run NAME CMD...: run_capture, remembering NAME for the sentinel check at the end.
run() { RUNS+=("$1"); run_capture "$@"; }
# foreign_auth: the foreign origin's requests that carried an Authorization header.
foreign_auth() { python3 -c '
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("origin") == "foreign" and e.get("authorization"): print(e["method"], e["path"], e["authorization"][:12] + "...")
' "$LOG"; }
foreign_requests() { grep -c '"origin": "foreign"' "$LOG" || true; }
no_foreign_auth() {  # no_foreign_auth RUN
  local leaked
  leaked=$(foreign_auth)
  [[ -z $leaked ]] || { show_output "$1"; fail "$1 sent credentials to the foreign origin:"$'\n'"$leaked"; }
}
CREDS=(--creds "$USER_NAME:$PASS_WORD")

check "push: an upload Location on another origin gets no credentials; the push works"
start_hostile basic
run push sb push "$LAYOUT:1" "$R/app:1" --store "$STORE" "${CREDS[@]}" -v
[[ $RC -eq 0 ]] || { show_output push; fail "the push failed"; }
[[ $(grep -c '"origin": "foreign", "method": "P' "$LOG") -ge 2 ]] || fail "the uploads did not go to the foreign origin: $(cat "$LOG")"
no_foreign_auth push

check "pull: blob GETs redirected to another origin get no credentials; the pull works"
run pull sb pull "$R/app:1" "$TMP/pulled" --store "$TMP/s-pull" "${CREDS[@]}" -v
[[ $RC -eq 0 ]] || { show_output pull; fail "the pull failed"; }
grep -q '"origin": "foreign", "method": "GET", "path": "/blob/' "$LOG" || fail "no blob GET reached the foreign origin"
no_foreign_auth pull
run pulljson "$SB" pull "$R/app:1" "$TMP/pulled2" --store "$TMP/s-pull2" "${CREDS[@]}" --progress json -v
[[ $RC -eq 0 ]] || { show_output pulljson; fail "the pull (--progress json) failed"; }

check "build --push to the same registry"
run buildpush "$SB" build "$TMP/img/src/recipe.yaml" -o "$TMP/built" --store "$STORE" --push-to "$R/built:1" --no-verify "${CREDS[@]}" \
  --compression gzip --level 1 -v
[[ $RC -eq 0 ]] || { show_output buildpush; fail "build --push failed"; }
no_foreign_auth buildpush

check "an error body that quotes the Authorization header shows no secret"
start_hostile echo --echo-auth
run echo sb push "$LAYOUT:1" "$R/app:1" --store "$STORE" "${CREDS[@]}" -v
[[ $RC -ne 0 ]] || { show_output echo; fail "the push passed a 403"; }
grep -q "403 denied" "$TMP/echo.err" || { show_output echo; fail "no 403 in the error"; }
run echojson "$SB" push "$LAYOUT:1" "$R/app:1" --store "$STORE" "${CREDS[@]}" --progress json -v
[[ $RC -ne 0 ]] || { show_output echojson; fail "the push passed a 403"; }

check "a 401 from the foreign origin sends no credentials anywhere foreign"
start_hostile foreign401 --foreign-401
# The image is pushed first (the foreign origin takes uploads as before).
run f401push sb push "$LAYOUT:1" "$R/app:1" --store "$STORE" "${CREDS[@]}" -v
[[ $RC -eq 0 ]] || { show_output f401push; fail "the push failed"; }
run f401pull sb pull "$R/app:1" "$TMP/pulled3" --store "$TMP/s-pull3" "${CREDS[@]}" -v
[[ $RC -ne 0 ]] || { show_output f401pull; fail "the pull passed a 401"; }
grep -q "401 unauthorized: who are you (from http://127.0.0.1:$F, where a redirect led" "$TMP/f401pull.err" ||
  { show_output f401pull; fail "the error does not say where the 401 came from"; }
no_foreign_auth f401pull
! grep -q '"origin": "foreign", "method": "GET", "path": "/token' "$LOG" ||
  { show_output f401pull; fail "the foreign 401's realm was asked for a token"; }

check "the registry's own Bearer challenge with a plain-http realm: no Basic credentials there"
start_hostile httprealm --challenge http-realm
run realm sb push "$LAYOUT:1" "$R/app:1" --store "$STORE" "${CREDS[@]}" -v
[[ $RC -ne 0 ]] || { show_output realm; fail "the push sent credentials to a plain-http realm, or went without them"; }
no_foreign_auth realm
grep -q "insecure-registry" "$TMP/realm.err" || { show_output realm; fail "the error does not say how to allow it"; }
run realmpull "$SB" pull "$R/app:1" "$TMP/pulled4" --store "$TMP/s-pull4" "${CREDS[@]}" --progress json
[[ $RC -ne 0 ]] || { show_output realmpull; fail "the pull sent credentials to a plain-http realm"; }
no_foreign_auth realmpull
check "... and with --insecure-registry they are sent to the realm (and only there)"
run realmok sb push "$LAYOUT:1" "$R/app:1" --store "$STORE" "${CREDS[@]}" --insecure-registry "$R" -v
[[ $RC -eq 0 ]] || { show_output realmok; fail "the push with --insecure-registry failed"; }
[[ $(foreign_auth | grep -c '^GET /token') -ge 1 ]] || fail "the realm got no credentials with --insecure-registry"
[[ -z $(foreign_auth | grep -v '^GET /token') ]] || fail "credentials went to the foreign origin beyond its realm: $(foreign_auth)"

check "a broken auth file is named in the error without quoting the secret in it"
mkdir -p "$TMP/badhome/.docker"
printf '{"auths": {"%s": {"username": "%s", "password": "%s}}}\n' "$R" "$USER_NAME" "$PASS_WORD" \
  >"$TMP/badhome/.docker/config.json"  # the password's string never ends
HOME="$TMP/badhome" run badauth sb push "$LAYOUT:1" "$R/app:1" --store "$STORE" -v
[[ $RC -ne 0 ]] || { show_output badauth; fail "a broken auth file was taken"; }
grep -q "config.json is not valid JSON" "$TMP/badauth.err" || { show_output badauth; fail "the error does not name the file"; }

check "a 1 GiB manifest body is refused at the cap, quickly, without holding it"
start_hostile huge
start=$(date +%s.%N)
run huge python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:])
print("maxrss_kib", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(r.returncode)' "$SB" pull "$R/app:huge" "$TMP/pulled5" --store "$TMP/s-pull5" "${CREDS[@]}" --progress plain
secs=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$start" "$(date +%s.%N)")
rss=$(sed -n 's/^maxrss_kib //p' "$TMP/huge.err")
sent=$(python3 -c 'import json,sys; print(max([json.loads(l).get("huge_sent", 0) for l in open(sys.argv[1])] or [0]))' "$LOG")
say "1 GiB manifest: exit $RC after ${secs}s, max RSS ${rss} KiB, the server sent ${sent} bytes"
[[ $RC -ne 0 ]] || { show_output huge; fail "a 1 GiB manifest was accepted"; }
grep -q "STACKBUILD_REGISTRY_MAX_DOCUMENT" "$TMP/huge.err" || { show_output huge; fail "the error does not name the cap's setting"; }
(( rss < 200000 )) || fail "pulling it took ${rss} KiB of memory"
python3 -c "import sys; sys.exit(float(sys.argv[1]) >= 20)" "$secs" || fail "refusing it took ${secs}s"

check "a cache's tag list that links its next page to another origin: not followed, the index read alone"
start_hostile tagsnext --tags-next-foreign
run cachew sb build "$TMP/img/src/recipe.yaml" -o "$TMP/cw" --store "$TMP/s-cw" --cache-to "$R/team/cache" \
  --no-verify "${CREDS[@]}" --compression gzip --level 1
[[ $RC -eq 0 ]] || { show_output cachew; fail "--cache-to failed"; }
run cacher sb build "$TMP/img/src/recipe.yaml" -o "$TMP/cr" --store "$TMP/s-cr" --cache-from "$R/team/cache" \
  --no-verify "${CREDS[@]}" --compression gzip --level 1
[[ $RC -eq 0 ]] || { show_output cacher; fail "--cache-from failed"; }
grep -q "warning: cache from $R/team/cache:buildcache: the tag list of team/cache links its next page to http://127.0.0.1:$F/v2/team/cache/tags/list?n=1&last=.*not following it; reading only the index under buildcache" \
  "$TMP/cacher.err" || { show_output cacher; fail "no warning naming the foreign next page"; }
n=$(grep -c "(from the cache $R/team/cache:buildcache)" "$TMP/cacher.err" || true)
[[ $n == 2 ]] || { show_output cacher; fail "expected both layers from the cache's index, got $n"; }
! grep -q '"origin": "foreign", "method": "GET", "path": "/v2/team/cache/tags/list' "$LOG" ||
  { show_output cacher; fail "the foreign next page was asked for"; }
no_foreign_auth cacher

check "no run printed the password or its base64 forms"
for n in "${RUNS[@]}"; do
  for s in "${SECRETS[@]}"; do
    ! grep -qF -- "$s" "$TMP/$n.out" "$TMP/$n.err" || { show_output "$n"; fail "$n printed a secret ($s)"; }
  done
done
pass
