# Shared bits of the integration tests. Sourced by tests/integration/test_*.sh, which
# CTest runs as `bash test_x.sh` with SB (the stackbuild binary) and SB_SOURCE_DIR
# (the repository root) in the environment. Exit status: 0 pass, 77 skipped (a missing
# prerequisite, with the reason printed), anything else a failure.
#
# After sourcing: $TMP is a fresh directory removed on exit, $STORE is a --store in it,
# $HERE is this folder, $SCHEMAS the OCI JSON schemas (may not exist: require_schemas).

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME=$(basename "$0" .sh)

say()  { printf '%s: %s\n' "$TEST_NAME" "$*"; }
# check WHAT: announces the next assertion, so a failure reads in context.
check() { printf '%s: check: %s\n' "$TEST_NAME" "$*"; }
fail() { printf '%s: FAIL: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
skip() { printf '%s: SKIP: %s\n' "$TEST_NAME" "$*" >&2; exit 77; }
pass() { printf '%s: PASS\n' "$TEST_NAME"; exit 0; }

require_tool() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || skip "'$t' is not installed"
  done
}
require_python_module() {
  local m
  for m in "$@"; do
    python3 -c "import $m" >/dev/null 2>&1 || skip "python3 module '$m' is not installed"
  done
}
require_schemas() {
  [[ -f "$SCHEMAS/image-manifest-schema.json" ]] ||
    skip "the OCI JSON schemas are not at $SCHEMAS (../shared/oci-image-spec-schemas beside the repository)"
}

[[ -n "${SB:-}" ]] || fail "SB (the stackbuild binary) is not set; run through ctest, or SB=build/stackbuild SB_SOURCE_DIR=. bash $0"
[[ -x "$SB" ]] || fail "SB=$SB is not an executable"
SB=$(cd "$(dirname "$SB")" && pwd)/$(basename "$SB")
[[ -n "${SB_SOURCE_DIR:-}" && -d "$SB_SOURCE_DIR" ]] || fail "SB_SOURCE_DIR (the repository root) is not set or not a directory"
SB_SOURCE_DIR=$(cd "$SB_SOURCE_DIR" && pwd)
SCHEMAS="$SB_SOURCE_DIR/../shared/oci-image-spec-schemas"
require_tool python3

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sb-$TEST_NAME.XXXXXX")
SERVERS=()  # background HTTP servers (serve_dir), stopped at exit
cleanup() {
  local rc=$?
  if (( ${#SERVERS[@]} )); then kill "${SERVERS[@]}" 2>/dev/null || true; fi
  chmod -R u+rwX "$TMP" 2>/dev/null || true
  rm -rf "$TMP"
  return $rc
}
trap cleanup EXIT
# shellcheck disable=SC2034  # used by the scripts that source this file
STORE="$TMP/store"

# sb ARGS...: runs stackbuild with plain progress (the store is given by the caller),
# the option put before a "--": what follows it is the command `stackbuild run` runs.
sb() {
  local args=() x done=0
  for x in "$@"; do
    if [[ $x == -- && $done == 0 ]]; then args+=(--progress plain --); done=1; else args+=("$x"); fi
  done
  ((done)) || args+=(--progress plain)
  "$SB" "${args[@]}"
}

# in_dir DIR CMD...: runs CMD (a command or a function) in DIR, in a subshell.
in_dir() {
  local d=$1
  shift
  (cd "$d" && "$@")
}

# run_capture NAME CMD...: runs CMD with stdout in $TMP/NAME.out, stderr in $TMP/NAME.err;
# sets RC (never aborts the script).
run_capture() {
  local name=$1
  shift
  RC=0
  "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || RC=$?
}

# show_output NAME: prints a captured command's output (for failure context).
show_output() {
  sed "s/^/  [$1 stdout] /" "$TMP/$1.out" >&2 || true
  sed "s/^/  [$1 stderr] /" "$TMP/$1.err" >&2 || true
}

# expect_ok NAME CMD...: runs CMD (captured) and fails the test unless it exits 0.
expect_ok() {
  local name=$1
  run_capture "$@"
  if [[ $RC -ne 0 ]]; then
    show_output "$name"
    shift
    fail "'$*' exited $RC, expected 0"
  fi
}

# expect_rc CODE NAME CMD...: runs CMD (captured) and fails the test unless it exits CODE.
expect_rc() {
  local want=$1 name=$2
  shift
  run_capture "$@"
  if [[ $RC -ne $want ]]; then
    show_output "$name"
    shift
    fail "'$*' exited $RC, expected $want"
  fi
}

# json FILE EXPR: prints the python expression EXPR evaluated with j = the JSON in FILE.
json() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# manifest_digest LAYOUT REF: the hex of the manifest named REF in LAYOUT's index.json.
manifest_digest() {
  python3 - "$1" "$2" <<'PY'
import json, sys
idx = json.load(open(sys.argv[1] + "/index.json"))
hits = [m["digest"] for m in idx["manifests"]
        if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name") == sys.argv[2]]
if len(hits) != 1:
    sys.exit(f"{sys.argv[1]}/index.json: {len(hits)} manifests named {sys.argv[2]!r}")
print(hits[0].split(":", 1)[1])
PY
}

# image_digests LAYOUT REF: prints "manifest <d>", "config <d>", "layer<i> <d>" and
# "diff_id<i> <d>" lines (full digests) for the image REF.
image_digests() {
  local m
  m=$(manifest_digest "$1" "$2") || fail "no image '$2' in $1"
  python3 - "$1" "$m" <<'PY'
import json, sys
layout, m = sys.argv[1], sys.argv[2]
man = json.load(open(f"{layout}/blobs/sha256/{m}"))
cfg = json.load(open(f"{layout}/blobs/sha256/{man['config']['digest'].split(':')[1]}"))
print("manifest sha256:" + m)
print("config " + man["config"]["digest"])
for i, l in enumerate(man["layers"]):
    print(f"layer{i} {l['digest']}")
for i, d in enumerate(cfg["rootfs"]["diff_ids"]):
    print(f"diff_id{i} {d}")
PY
}

# leftover_temps DIR: lists temp files (*.tmp-*, *.tmp, .tmp*) under DIR.
leftover_temps() {
  find "$1" \( -name '*.tmp-*' -o -name '*.tmp' -o -name '.tmp*' -o -name '*.partial' \) -print 2>/dev/null || true
}

# store_temps STORE: leftover temp files and anything left in the store's tmp/ folder.
store_temps() {
  leftover_temps "$1"
  if [[ -d "$1/tmp" ]]; then find "$1/tmp" -mindepth 1 -print; fi
}

# verify_blobs DIR: every DIR/blobs/sha256/<hex> hashes to <hex>.
verify_blobs() {
  local f n=0
  [[ -d "$1/blobs/sha256" ]] || fail "$1 has no blobs/sha256"
  for f in "$1"/blobs/sha256/*; do
    [[ "$(sha256sum <"$f" | cut -d' ' -f1)" == "$(basename "$f")" ]] ||
      fail "blob $f does not hash to its name"
    n=$((n + 1))
  done
  [[ $n -gt 0 ]] || fail "$1/blobs/sha256 is empty"
  say "$n blob(s) in $1 hash to their names"
}

# make_tree DIR [--reverse]: the rich input tree (see make_tree.py).
# The toolkit directory an nvcc belongs to, as nvcc itself reports it (its
# TOP), so that a wrapper script on PATH (/usr/local/bin/nvcc) or a symlinked
# include directory does not send a test to the wrong tree.
cuda_root_of() {
  local top
  top=$("$1" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
  [[ -n "$top" ]] || top="$(dirname "$1")/.."
  (cd "$top" 2>/dev/null && pwd -P)
}

# make_ca DIR: a CA (DIR/ca.pem) and a server certificate for 127.0.0.1 signed by it.
make_ca() {
  local d=$1
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" -days 2 \
    -subj /CN=stackbuild-test-ca >/dev/null 2>&1 || fail "openssl: CA"
  openssl req -newkey rsa:2048 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
    -subj /CN=127.0.0.1 >/dev/null 2>&1 || fail "openssl: CSR"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/ext.cnf"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -out "$d/server.pem" -days 2 -extfile "$d/ext.cnf" >/dev/null 2>&1 || fail "openssl: sign"
}

# serve_dir DIR [CA_DIR]: serves DIR's files on 127.0.0.1 until the test
# ends, over HTTPS with CA_DIR's server certificate (make_ca) when given;
# sets SERVED_URL (http[s]://127.0.0.1:PORT).
serve_dir() {
  local port_file scheme=http
  port_file=$(mktemp "$TMP/port.XXXXXX")
  [[ -n ${2:-} ]] && scheme=https
  python3 - "$1" "$port_file" "${2:-}" <<'PY' &
import functools, http.server, ssl, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
h = functools.partial(Quiet, directory=sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
if sys.argv[3]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3] + "/server.pem", sys.argv[3] + "/server.key")
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
  SERVERS+=($!)
  for _ in $(seq 50); do [[ -s $port_file ]] && break; sleep 0.1; done
  [[ -s $port_file ]] || fail "the HTTP server for $1 did not start"
  # shellcheck disable=SC2034  # used by the scripts that source this file
  SERVED_URL="$scheme://127.0.0.1:$(cat "$port_file")"
}

# net_server login DIR USER:PASSWORD | net_server proxy LOG: net_servers.py
# (a file server behind a basic login, or a logging forward proxy) until the
# test ends; sets NET_URL (http://127.0.0.1:PORT).
net_server() {
  local mode=$1 port_file
  shift
  port_file=$(mktemp "$TMP/port.XXXXXX")
  if [[ $mode == login ]]; then
    python3 "$HERE/net_servers.py" login "$1" "$port_file" "$2" &
  else
    python3 "$HERE/net_servers.py" proxy "$port_file" "$1" &
  fi
  SERVERS+=($!)
  for _ in $(seq 50); do [[ -s $port_file ]] && break; sleep 0.1; done
  [[ -s $port_file ]] || fail "net_servers.py $mode did not start"
  NET_URL="http://127.0.0.1:$(cat "$port_file")"
}
make_tree() { python3 "$HERE/make_tree.py" "$@"; }

# e2e_archive_build GB: what an e2e test that builds from this machine's Debian
# archive in the sandbox needs: root, deb822 Debian sources and GB free in $TMP
# (SB_E2E_NEED_GB overrides); else it is skipped. Sets S, the store
# (SB_E2E_STORE=DIR keeps the downloads between runs).
e2e_archive_build() {
  [[ $(id -u) == 0 ]] || skip "the build sandbox needs root here"
  [[ -f /etc/apt/sources.list.d/debian.sources ]] || skip "no deb822 Debian sources on this machine"
  S=${SB_E2E_STORE:-$STORE}
  local need=${SB_E2E_NEED_GB:-$1} avail
  avail=$(df -Pk "$TMP" | awk 'NR==2 {print $4}')
  (( avail > need * 1024 * 1024 )) || skip "needs $need GB free in $TMP (SB_E2E_NEED_GB)"
}

# expected_copy SRC DST: copies SRC's contents to DST the way a copy layer normalises
# them: directories and files with any x bit 0755, other files 0644 (symlinks as is),
# hardlinks kept.
expected_copy() {
  mkdir -p "$2"
  cp -a "$1/." "$2/"
  find "$2" -type d -exec chmod 0755 {} +
  find "$2" -type f -perm /0111 -exec chmod 0755 {} +
  find "$2" -type f ! -perm /0111 -exec chmod 0644 {} +
}

# fake_driver_host DIR [VERSION]: a host on NVIDIA driver VERSION (default
# 535.104.05) with one GPU, as discovery reads it: /proc/driver/nvidia, and a
# libcuda and an NVML (soname .1) that answer as a driver would, from the
# environment of whoever asks: cuDriverGetVersion $FAKE_CUDA (default 12020),
# the brand number $FAKE_BRAND (nvmlBrandType_t, default 2: tesla) and the
# compute capability $FAKE_CC (default 9.0). No device nodes.
fake_driver_host() {
  local dir=$1 version=${2:-535.104.05} lib=$1/usr/lib/x86_64-linux-gnu
  mkdir -p "$dir/proc/driver/nvidia/gpus/0000:3b:00.0" "$lib"
  echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  $version  Tue Mar  5 22:23:56 UTC 2024" \
    >"$dir/proc/driver/nvidia/version"
  printf 'Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-aaaa\nDevice Minor: \t 0\n' \
    >"$dir/proc/driver/nvidia/gpus/0000:3b:00.0/information"
  cat >"$dir/fakedrv.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
static const char *var(const char *n, const char *d) { const char *v = getenv(n); return v ? v : d; }
int cuDriverGetVersion(int *v) { *v = atoi(var("FAKE_CUDA", "12020")); return 0; }
static int dev;
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetHandleByUUID(const char *u, void **d) { (void)u; *d = &dev; return 0; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *p, void **d) { (void)p; *d = &dev; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { (void)i; *d = &dev; return 0; }
int nvmlDeviceGetBrand(void *d, int *b) { (void)d; *b = atoi(var("FAKE_BRAND", "2")); return 0; }
int nvmlDeviceGetCudaComputeCapability(void *d, int *a, int *b) {
  (void)d; return sscanf(var("FAKE_CC", "9.0"), "%d.%d", a, b) == 2 ? 0 : 3;
}
C
  local l
  for l in cuda nvidia-ml; do
    cc -shared -fPIC -Wl,-soname,"lib$l.so.1" -o "$lib/lib$l.so.$version" "$dir/fakedrv.c" ||
      fail "could not compile the fake lib$l"
  done
  rm "$dir/fakedrv.c"
}
