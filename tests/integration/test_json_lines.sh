#!/usr/bin/env bash
# --json, for every command that takes it: stdout holds JSON lines and nothing
# else (one JSON value a line: events, and a command's own document on one
# line), so that `stackbuild CMD --json | while read -r line` and JSON-lines
# readers work. Offline: examples/hello.yaml (local files), a host ELF file,
# this host's (missing) GPU. (`build --json --push-to` and `test --json`, with
# a registry and the sandbox: test_image_tests.sh.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$TMP"

# json_lines NAME: every line of $TMP/NAME.out is one JSON value, and there is one.
json_lines() {
  python3 - "$TMP/$1.out" <<'PY' || { show_output "$1"; fail "stdout of '$1 --json' is not JSON lines"; }
import json, sys
lines = open(sys.argv[1]).read().split("\n")
if lines[-1] != "": sys.exit("the last line has no newline")
if len(lines) < 2: sys.exit("nothing on stdout")
for n, line in enumerate(lines[:-1], 1):
    try:
        json.loads(line)
    except Exception:
        sys.exit(f"line {n}: not a JSON value: {line!r}")
PY
}

# json_lines_of NAME FILTER FIELD: FIELD of each line of $TMP/NAME.out where FILTER holds (j: the line).
json_lines_of() {
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if eval(sys.argv[2]): print(eval(sys.argv[3]))' "$TMP/$1.out" "$2" "$3"
}

HELLO="$SB_SOURCE_DIR/examples/hello.yaml"
mkdir -p tree/etc && echo hi >tree/etc/hi

check "build, plan, layer, unpack, gc, cuda-code, gpu and version: --json gives JSON lines"
expect_ok build "$SB" build "$HELLO" -o out --store "$STORE" --json
json_lines build
expect_ok plan "$SB" plan "$HELLO" --json
json_lines plan
expect_ok layer "$SB" layer tree --store "$STORE" --json
json_lines layer
expect_ok unpack "$SB" unpack out:latest root --store "$STORE" --json
json_lines unpack
expect_ok gc "$SB" gc --store "$STORE" --dry-run --json
json_lines gc
expect_ok gcv "$SB" gc --store "$STORE" --dry-run --verbose --json
json_lines gcv
expect_ok cuda "$SB" cuda-code --json /bin/true
json_lines cuda
expect_ok gpu "$SB" gpu --json
json_lines gpu

expect_ok version "$SB" version --json
json_lines version

# run: the command's output becomes `output` events (needs the sandbox: root).
source "$HERE/sandbox_lib.sh"
if [[ $(id -u) -eq 0 && -x /bin/busybox ]]; then
  check "run --json: the command's lines are output events"
  make_busybox_root bb
  printf 'stack: bb\nlayers:\n  - {name: base, copy: [{src: bb/, dst: /}]}\ntags: ["bb:1"]\n' >bb.yaml
  expect_ok bbuild "$SB" build bb.yaml -o bbout --store "$STORE" --json
  expect_ok run "$SB" run bbout:1 --store "$STORE" --json -- sh -c 'echo one; printf "two\377"'
  json_lines run
  [[ "$(json_lines_of run 'j.get("event") == "output"' 'j["line"]')" == $'one\ntwo\ufffd' ]] ||
    { show_output run; fail "run --json: the output events are not the command's lines"; }
else
  say "run --json not checked: it needs root and a static busybox"
fi

check "without --json, the documents stay readable (indented)"
expect_ok plan-text "$SB" plan "$HELLO"
grep -q "hello" "$TMP/plan-text.out" || { show_output plan-text; fail "plan without --json printed no table"; }
expect_ok layer-text "$SB" layer tree --store "$STORE"
grep -q '^  "digest"' "$TMP/layer-text.out" || { show_output layer-text; fail "layer without --json is not indented"; }

pass
