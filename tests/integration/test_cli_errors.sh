#!/usr/bin/env bash
# Bad input gives a clear error and the documented exit status (stackbuild --help:
# 2 a bad command line, 3 an invalid input file), and a failed build leaves nothing
# behind: no output where there was none, an existing output unchanged, no temp files
# in the store.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool cmp
cd "$TMP"

mkdir files && printf 'hello\n' >files/a
good() {  # good [EXTRA YAML]: a valid recipe, with optional extra top-level lines
  printf 'stack: x\nsource_date_epoch: 1704067200\nlayers:\n  - name: a\n    copy:\n      - {src: files/a, dst: /a}\n%s' "${1:-}"
}

# expect_error CODE NAME PATTERN... -- CMD...: CMD exits CODE, stderr starts with
# "stackbuild: error:" and matches every (grep -E) PATTERN.
expect_error() {
  local code=$1 name=$2 pats=()
  shift 2
  while [[ $1 != -- ]]; do pats+=("$1"); shift; done
  shift
  expect_rc "$code" "$name" "$@"
  grep -q '^stackbuild: error: ' "$TMP/$name.err" || { show_output "$name"; fail "$name: no 'stackbuild: error:' line on stderr"; }
  local p
  for p in "${pats[@]}"; do
    grep -qE -- "$p" "$TMP/$name.err" || { show_output "$name"; fail "$name: stderr does not match /$p/"; }
  done
  say "$name: exit $code: $(grep -m1 '^stackbuild: error: ' "$TMP/$name.err")"
}
# no_output PATH: a failed build wrote nothing at PATH.
no_output() { [[ ! -e "$1" ]] || { ls -la "$1" >&2; fail "a failed build left $1 behind"; }; }
no_store_temps() {
  local t
  t=$(store_temps "$STORE")
  [[ -z "$t" ]] || fail "temp files left in the store: $t"
}

# --- recipes that are invalid: exit 3, file:line:col, the line quoted -------------------------
check "an unknown recipe key: exit 3, file:line:col, the quoted line and a suggestion"
cat >unknown.yaml <<'YAML'
stack: x
layrs:
  - name: a
    copy: [{src: files/a, dst: /a}]
YAML
expect_error 3 unknown-key "unknown\.yaml:2:1:" "unknown key 'layrs'" "did you mean 'layers'" '^ +layrs:$' '^ +\^$' \
  -- sb build unknown.yaml -o out-unknown --store "$STORE"
no_output out-unknown

check "an unknown key in a nested map (a copy item) is found at its place"
good | sed 's/{src: files/{srcs: files/' >nested.yaml
expect_error 3 nested-key "nested\.yaml:6:10:" "unknown key 'srcs'" "did you mean 'src'" -- sb build nested.yaml -o out-nested --store "$STORE"
no_output out-nested

check "a missing copy source: exit 3 with the copy item's location"
good | sed 's|files/a|files/nope|' >missing.yaml
expect_error 3 missing-src "missing\.yaml:6:[0-9]+:" "files/nope" "does not exist" -- sb build missing.yaml -o out-missing --store "$STORE"
no_output out-missing

check "a copy source outside the recipe's directory (a host file, or a link to one): exit 3 at its line; --allow-host-paths lets it"
good | sed 's|files/a|/etc/passwd|' >host.yaml
expect_error 3 host-src "host\.yaml:6:[0-9]+:" "'/etc/passwd' is /etc/passwd, outside the recipe's directory" "--allow-host-paths" \
  -- sb build host.yaml -o out-host --store "$STORE"
no_output out-host
ln -s /etc files/etc
good | sed 's|files/a|files/etc/passwd|' >host-link.yaml
expect_error 3 host-link "host-link\.yaml:6:[0-9]+:" "outside the recipe's directory" -- sb build host-link.yaml -o out-host-link --store "$STORE"
no_output out-host-link
rm files/etc
expect_ok host-allowed sb build host.yaml -o out-host --store "$STORE" --allow-host-paths

check "a relative copy destination and a bad mode: exit 3 at the value"
good | sed 's|dst: /a|dst: a|' >reldst.yaml
expect_error 3 relative-dst "reldst\.yaml:6:[0-9]+:" "absolute" -- sb build reldst.yaml -o out-reldst --store "$STORE"
good | sed 's|dst: /a}|dst: /a, mode: "0999"}|' >badmode.yaml
expect_error 3 bad-mode "badmode\.yaml:6:[0-9]+:" "0999" -- sb build badmode.yaml -o out-badmode --store "$STORE"

check "a bad tag in the recipe: exit 3 at the tags, before any layer is built"
good 'tags: ["Bad Tag!:1.0"]
' >badtag.yaml
expect_error 3 bad-tag "badtag\.yaml:7:[0-9]+:" "Bad Tag!" -- sb build badtag.yaml -o out-badtag --store "$TMP/tagstore"
no_output out-badtag
[[ -z "$(ls -A "$TMP/tagstore/blobs/sha256" 2>/dev/null)" ]] || fail "a build with a bad tag wrote layer blobs first"

check "a bad --tag on the command line: exit 2"
good >good.yaml
expect_error 2 bad-tag-option "UPPER" -- sb build good.yaml --tag UPPER:x -o out-badtagopt --store "$STORE"
expect_error 2 empty-tag-option "tag" -- sb build good.yaml --tag name: -o out-emptytag --store "$STORE"
no_output out-badtagopt
no_output out-emptytag

check "an empty recipe: exit 3"
: >empty.yaml
expect_error 3 empty-recipe "empty\.yaml" -- sb build empty.yaml -o out-empty --store "$STORE"
no_output out-empty

check "a recipe that is not YAML: exit 3 with a location"
printf 'stack: [unclosed\nlayers: {\n' >notyaml.yaml
expect_error 3 not-yaml "notyaml\.yaml:[0-9]+:[0-9]+:" -- sb build notyaml.yaml -o out-notyaml --store "$STORE"
no_output out-notyaml

check "a recipe that is YAML but not a mapping, and one with no layers: exit 3"
printf -- '- just\n- a list\n' >list.yaml
expect_error 3 not-a-map "list\.yaml:1:1:" "mapping" -- sb build list.yaml -o out-list --store "$STORE"
printf 'stack: x\nlayers: []\n' >nolayers.yaml
expect_error 3 no-layers "nolayers\.yaml:2:[0-9]+:" "no layers" -- sb build nolayers.yaml -o out-nolayers --store "$STORE"

check "a recipe file that does not exist: exit 3"
expect_error 3 no-recipe "nonexistent\.yaml" -- sb build nonexistent.yaml -o out-nonexistent --store "$STORE"

# --- bad command lines: exit 2 -----------------------------------------------------------------
check "an unknown option: exit 2, with a suggestion for a near miss"
expect_error 2 unknown-option "--frobnicate" -- sb build good.yaml --frobnicate --store "$STORE"
expect_error 2 misspelt-option "did you mean '--compression'" -- sb build good.yaml --compresion zstd --store "$STORE"
check "an unknown command, a missing recipe argument, bad option values: exit 2"
expect_error 2 unknown-command "frob" -- sb frob
expect_error 2 no-recipe-arg "recipe" -- sb build --store "$STORE"
expect_error 2 bad-compression "lz4" -- sb build good.yaml --compression lz4 --store "$STORE"
expect_error 2 bad-format "tar" -- sb build good.yaml --format tar --store "$STORE"
expect_error 2 bad-jobs "zero" -- sb build good.yaml -j zero --store "$STORE"
no_output out/x
no_output x.tar

# --- a failed build leaves nothing behind -------------------------------------------------------------
check "a failing build into an existing OCI layout leaves it byte-identical"
expect_ok build-good sb build good.yaml -o "$TMP/out-good" --store "$STORE"
cp -a out-good snapshot
# Fails while building a layer (the source is missing) ...
good | sed 's|files/a|files/gone|' >fails-early.yaml
expect_error 3 fails-early "files/gone" -- sb build fails-early.yaml -o "$TMP/out-good" --store "$STORE"
diff -r --no-dereference snapshot out-good || fail "a build that failed on a missing source changed out-good"
# ... and after the layers are built (the tag is only checked when the image is written).
printf 'other\n' >files/b
{ good; printf '  - name: b\n    copy:\n      - {src: files/b, dst: /b}\ntags: ["x:ok", "NOT OK:1"]\n'; } >fails-late.yaml
expect_error 3 fails-late "NOT OK" -- sb build fails-late.yaml -o "$TMP/out-good" --store "$STORE"
cmp snapshot/index.json out-good/index.json || fail "a failed build changed out-good/index.json"
diff -r --no-dereference snapshot out-good || fail "a failed build changed out-good"
no_store_temps

check "a failing docker-archive build leaves an existing tarball byte-identical, and none where there was none"
expect_ok build-good-tar sb build good.yaml --format docker-archive -o "$TMP/good.tar" --store "$STORE"
cp good.tar snapshot.tar
expect_error 3 fails-late-tar "NOT OK" -- sb build fails-late.yaml --format docker-archive -o "$TMP/good.tar" --store "$STORE"
cmp snapshot.tar good.tar || fail "a failed build changed good.tar"
expect_error 3 fails-late-tar2 "NOT OK" -- sb build fails-late.yaml --format docker-archive -o "$TMP/new.tar" --store "$STORE"
no_output new.tar
! leftover_temps "$TMP" | grep -v "^$STORE/" | grep -q . || fail "temp files left beside the outputs: $(leftover_temps "$TMP")"
no_store_temps

pass
