#!/usr/bin/env bash
# Ctrl-C and SIGTERM leave nothing half written (util/interrupt.hpp): a build
# stopped while it fetches, compresses a layer or runs a build step exits 130
# saying "interrupted"/"terminated", leaves no process of its sandbox, no
# mount, no temporary file in the store or beside the output, no scratch
# directory in $TMPDIR and no output (an existing layout keeps its bytes);
# the same build run again to the end gives the digest of a build that was
# never stopped, and a download stopped half way resumes where it stopped. A second signal ends stackbuild at once, and still leaves no
# sandbox process.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/sandbox_lib.sh"
require_sandbox
require_tool timeout pgrep zstd

R="$TMP/r"
mkdir -p "$R" "$TMP/scratch"
make_busybox_root "$R/base"
# About 4.5 MB of words: zstd at level 19 takes seconds on it, long enough to
# be stopped half way through the layer.
python3 - "$R/words.txt" <<'PY'
import random, sys
r = random.Random(7)
words = ["".join(r.choice("abcdefghij") for _ in range(r.randint(2, 9))) for _ in range(5000)]
with open(sys.argv[1], "w") as f:
    for i in range(700000):
        f.write(r.choice(words) + (" " if i % 12 else "\n"))
PY
# An archive source served slowly (pinned, so the fetch goes through the store).
mkdir -p "$TMP/src/pkg-1.0" "$TMP/www"
head -c 4000000 /dev/urandom >"$TMP/src/pkg-1.0/blob.bin"
tar -C "$TMP/src" -czf "$TMP/www/pkg-1.0.tar.gz" pkg-1.0
SRC_SHA=$(sha256sum "$TMP/www/pkg-1.0.tar.gz" | cut -d' ' -f1)
PORT_FILE="$TMP/port"
python3 - "$TMP/www" "$PORT_FILE" "$TMP/ranges" <<'PY' &
# 64 KiB every 0.1 s: a 4 MB download takes about 6 s. Honours "Range: bytes=N-"
# and logs each request's Range (or "-") to the third argument.
import http.server, os, sys, time
root, port_file, log = sys.argv[1], sys.argv[2], sys.argv[3]
class Slow(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        path = os.path.join(root, self.path.lstrip("/"))
        if not os.path.isfile(path):
            self.send_error(404); return
        data = open(path, "rb").read()
        rng = self.headers.get("Range")
        with open(log, "a") as f: f.write((rng or "-") + "\n")
        start = int(rng[len("bytes="):].rstrip("-")) if rng else 0
        self.send_response(206 if rng else 200)
        if rng: self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        try:
            for i in range(start, len(data), 65536):
                self.wfile.write(data[i:i + 65536]); self.wfile.flush(); time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
open(port_file + ".tmp", "w").write(str(srv.server_address[1]))
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
PY
SERVERS+=($!)
for _ in $(seq 50); do [[ -s "$PORT_FILE" ]] && break; sleep 0.1; done
PORT=$(cat "$PORT_FILE")

cat >"$R/compress.yaml" <<'EOF'
stack: intr
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - {name: words, copy: [{src: words.txt, dst: /data/words.txt}]}
EOF
cat >"$R/step.yaml" <<'EOF'
stack: intr
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: slow
    build:
      run: "setsid sh -c 'sleep 876543 </dev/null >/dev/null 2>&1 &'; echo step-started; sleep 876544; echo done >/done"
EOF
cat >"$R/fetch.yaml" <<EOF
stack: intr
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: pkg
    source: {url: "http://127.0.0.1:$PORT/pkg-1.0.tar.gz", sha256: "$SRC_SHA"}
    build:
      run: "test -f blob.bin && mkdir -p /opt && cp blob.bin /opt/blob.bin"
EOF

# start NAME RECIPE STORE ARGS...: runs the build in the background (plain
# progress with [start] lines, scratch directories in $TMP/scratch); sets SBPID.
start() {
  local name=$1 recipe=$2 store=$3
  shift 3
  TMPDIR="$TMP/scratch" "$SB" build "$R/$recipe" -o "$TMP/out-$name" --store "$store" --progress plain -v "$@" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" &
  SBPID=$!
}
# wait_for NAME PATTERN: waits (up to 60 s) until the build's stderr matches.
wait_for() {
  local i
  for i in $(seq 300); do
    grep -q -- "$2" "$TMP/$1.err" && return 0
    kill -0 "$SBPID" 2>/dev/null || { show_output "$1"; fail "$1: the build ended before '$2'"; }
    sleep 0.2
  done
  show_output "$1"
  fail "$1: no '$2' after 60 s"
}
# stop NAME SIGNAL WORD: sends SIGNAL, expects exit 130 within 30 s and WORD
# ("interrupted"/"terminated") in the error.
stop() {
  local name=$1 sig=$2 word=$3 rc=0 i
  kill "-$sig" "$SBPID"
  for i in $(seq 150); do kill -0 "$SBPID" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$SBPID" 2>/dev/null && { kill -9 "$SBPID"; show_output "$name"; fail "$name: still running 30 s after SIG$sig"; }
  wait "$SBPID" || rc=$?
  [[ $rc == 130 ]] || { show_output "$name"; fail "$name: exit status $rc after SIG$sig, expected 130"; }
  grep -q "stackbuild: error: $word" "$TMP/$name.err" || { show_output "$name"; fail "$name: the error does not say '$word'"; }
}
# no_debris NAME STORE [PARTIAL]: nothing half written anywhere; with PARTIAL,
# the store's tmp/ may keep one download to resume (tmp/partial-*, which no
# blob or record names and `gc` removes).
no_debris() {
  local name=$1 store=$2 t
  t=$(store_temps "$store")
  [[ -z "${3:-}" ]] || t=$(grep -v "^$store/tmp/partial-[0-9a-f]*$" <<<"$t" || true)
  [[ -z "$t" ]] || fail "$name: temporary files left in the store: $t"
  t=$(find "$TMP/scratch" -mindepth 1 -maxdepth 1)
  [[ -z "$t" ]] || fail "$name: scratch directories left in \$TMPDIR: $t"
  [[ ! -e "$TMP/out-$name" ]] || fail "$name: the output $TMP/out-$name was written"
  ! leftover_temps "$TMP" | grep -v "^$TMP/www/" | grep -q . || fail "$name: temporary files left: $(leftover_temps "$TMP")"
  ! grep -q " $TMP/" /proc/self/mounts || fail "$name: mounts left: $(grep " $TMP/" /proc/self/mounts)"
}
# digest_of LAYOUT: the manifest digest of its only image.
digest_of() { json "$1/index.json" 'j["manifests"][0]["digest"]'; }

check "SIGINT while a layer is compressed: exit 130, 'interrupted', nothing half written"
start c1 compress.yaml "$TMP/s-c" --compression zstd --level 19 --threads 1
wait_for c1 "\[start\] compress layer words"
sleep 1
stop c1 INT interrupted
no_debris c1 "$TMP/s-c"

check "SIGTERM while a layer is compressed: exit 130, 'terminated', nothing half written"
start c2 compress.yaml "$TMP/s-c" --compression zstd --level 19 --threads 1
wait_for c2 "\[start\] compress layer words"
sleep 1
stop c2 TERM terminated
no_debris c2 "$TMP/s-c"

check "the same store then builds to the end, with the digest of a build never stopped"
expect_ok c3 sb build "$R/compress.yaml" -o "$TMP/c3" --store "$TMP/s-c" --compression zstd --level 19
expect_ok c4 sb build "$R/compress.yaml" -o "$TMP/c4" --store "$TMP/s-ref" --compression zstd --level 19
[[ "$(digest_of "$TMP/c3")" == "$(digest_of "$TMP/c4")" ]] ||
  fail "after the interruptions: $(digest_of "$TMP/c3"); never stopped: $(digest_of "$TMP/c4")"
verify_blobs "$TMP/c3"

check "SIGINT while a build step runs: its processes (a daemonised one too) are gone, no mount, no debris"
start s1 step.yaml "$TMP/s-s"
wait_for s1 "slow | step-started"
stop s1 INT interrupted
for _ in $(seq 25); do pgrep -f "sleep 87654" >/dev/null || break; sleep 0.2; done
no_process_matching "sleep 87654"
no_debris s1 "$TMP/s-s"

check "an existing layout keeps its bytes when a build into it is stopped"
expect_ok keep sb build "$R/compress.yaml" -o "$TMP/out-s2" --store "$TMP/s-s"
before=$(cd "$TMP/out-s2" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
start s2 step.yaml "$TMP/s-s"
wait_for s2 "slow | step-started"
stop s2 TERM terminated
after=$(cd "$TMP/out-s2" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
[[ "$before" == "$after" ]] || fail "the layout changed: $(diff <(echo "$before") <(echo "$after"))"
no_process_matching "sleep 87654"
rm -rf "$TMP/out-s2"
no_debris s2 "$TMP/s-s"

check "SIGINT while a source archive downloads: no partial blob enters the store, no debris"
start f1 fetch.yaml "$TMP/s-f"
wait_for f1 "\[start\] fetch"
sleep 1
stop f1 INT interrupted
no_debris f1 "$TMP/s-f" partial
[[ ! -e "$TMP/s-f/blobs/sha256/$SRC_SHA" ]] || fail "the half-fetched archive is in the store"
[[ "$(cat "$TMP/ranges")" == "-" ]] || fail "requests before the interruption: $(cat "$TMP/ranges")"
part=$(find "$TMP/s-f/tmp" -name 'partial-*' -printf '%s\n')
[[ -n "$part" && "$part" -gt 0 && "$part" -lt "$(stat -c %s "$TMP/www/pkg-1.0.tar.gz")" ]] ||
  fail "no part of the download kept to resume (size '$part')"

check "the same store then resumes the download where it stopped, and builds to the end"
expect_ok f2 sb build "$R/fetch.yaml" -o "$TMP/f2" --store "$TMP/s-f"
[[ "$(sed -n 2p "$TMP/ranges")" == "bytes=$part-" ]] || fail "the second build asked '$(sed -n 2p "$TMP/ranges")', not 'bytes=$part-'"
[[ -f "$TMP/s-f/blobs/sha256/$SRC_SHA" ]] || fail "the archive is not in the store after the build"
[[ -z "$(store_temps "$TMP/s-f")" ]] || fail "temporary files left after the resumed build: $(store_temps "$TMP/s-f")"

check "a second signal ends stackbuild at once, and the sandbox's processes with it"
start s3 step.yaml "$TMP/s-s3"
wait_for s3 "slow | step-started"
kill -INT "$SBPID"
kill -INT "$SBPID"
rc=0
for _ in $(seq 50); do kill -0 "$SBPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SBPID" 2>/dev/null && { kill -9 "$SBPID"; fail "still running 5 s after the second SIGINT"; }
wait "$SBPID" || rc=$?
[[ $rc == 130 ]] || { show_output s3; fail "exit status $rc after two SIGINTs, expected 130"; }
for _ in $(seq 25); do pgrep -f "sleep 87654" >/dev/null || break; sleep 0.2; done
no_process_matching "sleep 87654"

pass
