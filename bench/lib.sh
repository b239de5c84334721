# shellcheck shell=bash
# Helpers shared by the benchmarks (sourced, not run).
#
# Smoke mode: every bench/*.sh takes --smoke as its first argument and then runs its
# own code path (the same tools, comparisons and table) on a tiny input made here, one
# round, against 127.0.0.1 servers only, in a few seconds, enforcing no bar. The default
# test run executes each (tests/integration/test_bench_smoke.sh) so that none rots
# unnoticed. A missing prerequisite exits 77 there (bench_skip): ctest's "skipped".

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

bench_now() { date +%s.%N; }

# bench_setup NAME SRC TOOL...: the common start of a benchmark of a tree. Sets die and
# log (messages prefixed NAME), SB (absolute; default: this checkout's build), SRC (the
# directory, links resolved), ROUNDS (checked; default 3) and W, a new scratch folder
# under $WORK or /tmp that is removed on exit (with any registry or server started).
# Every TOOL must be installed. With SMOKE=1: ROUNDS=1 and SRC is bench_smoke_tree's
# tree in W (the SRC argument is ignored).
bench_setup() {
  BENCH_NAME=$1 SRC=$2
  shift 2
  local bench_dir t
  bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  SB=${SB:-$bench_dir/../build/stackbuild}
  SB=$(realpath -m "$SB")
  ROUNDS=${ROUNDS:-3}
  [[ ${SMOKE:-0} == 1 ]] && ROUNDS=1
  [[ -x "$SB" ]] || die "no stackbuild at $SB (set SB=...)"
  if [[ ${SMOKE:-0} != 1 ]]; then
    [[ -d "$SRC" ]] || die "no directory at $SRC"
    SRC=$(readlink -f "$SRC")
  fi
  for t in "$@"; do command -v "$t" >/dev/null || bench_skip "'$t' is not installed"; done
  [[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
  if [[ -n "${WORK:-}" ]]; then
    mkdir -p "$WORK"
    W=$(mktemp -d "$WORK/$BENCH_NAME.XXXXXX")
  else
    W=$(mktemp -d "/tmp/$BENCH_NAME.XXXXXX")
  fi
  trap 'bench_registry_stop; bench_server_stop; rm -rf "$W"' EXIT
  if [[ ${SMOKE:-0} == 1 ]]; then
    bench_smoke_tree "$W/smoke-src"
    SRC=$W/smoke-src
  fi
}
die() { printf '%s: %s\n' "${BENCH_NAME:-bench}" "$*" >&2; exit 1; }
log() { printf '%s: %s\n' "${BENCH_NAME:-bench}" "$*" >&2; }

# bench_skip MSG: a missing prerequisite. With SMOKE=1 it exits 77, which ctest counts
# as skipped; otherwise it is the error it always was (die).
bench_skip() {
  local msg="$*"
  # The compared tools come with the test command's dependencies, not the build's.
  [[ $msg == *"is not installed"* ]] && msg+=" (bash scripts/install-deps.sh --with-tests installs the benchmarks' tools)"
  if [[ ${SMOKE:-0} == 1 ]]; then
    printf '%s: SKIP: %s\n' "${BENCH_NAME:-bench}" "$msg" >&2
    exit 77
  fi
  die "$msg"
}

# bench_smoke_note: with SMOKE=1, says under the table that its figures and bars mean
# nothing (a tiny input, one round).
bench_smoke_note() {
  [[ ${SMOKE:-0} == 1 ]] || return 0
  printf '%s: --smoke: a tiny input and one round; the figures say nothing of speed, no bar is enforced\n' \
    "${BENCH_NAME:-bench}"
}

# bench_smoke_tree DIR: the smoke input: tests/integration/make_tree.py's rich tree
# (a few top-level directories; links, a hardlink, long and non-ASCII names, an empty
# directory) with 1 MiB of compressible data in big/: every tool meets the awkward
# entries, and the timings are not all zero.
bench_smoke_tree() {
  python3 "$BENCH_ROOT/tests/integration/make_tree.py" "$1" --big 1 >/dev/null ||
    die "make_tree.py could not make the smoke tree in $1"
}

# bench_serve_dir DIR: serves DIR's files over plain HTTP on 127.0.0.1 until
# bench_server_stop; sets BENCH_SERVED_URL (http://127.0.0.1:PORT) and BENCH_SERVER_PID.
bench_serve_dir() {
  local port _
  port=$(bench_port)
  python3 -m http.server --bind 127.0.0.1 --directory "$1" "$port" >/dev/null 2>&1 &
  BENCH_SERVER_PID=$!
  BENCH_SERVED_URL=http://127.0.0.1:$port
  for _ in $(seq 100); do
    curl -s -o /dev/null "$BENCH_SERVED_URL/" && return 0
    sleep 0.1
  done
  echo "the file server for $1 on port $port did not start" >&2
  return 1
}
bench_server_stop() {
  [[ -n ${BENCH_SERVER_PID:-} ]] || return 0
  kill "$BENCH_SERVER_PID" 2>/dev/null || true
  wait "$BENCH_SERVER_PID" 2>/dev/null || true
  BENCH_SERVER_PID=
}

# bench_port: a free TCP port on 127.0.0.1.
bench_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# bench_registry_start DIR PORT: a docker-registry (distribution 2.8, plain HTTP) on
# 127.0.0.1:PORT with fresh storage in DIR/data; sets BENCH_REGISTRY_PID. Fails when it
# does not answer within 10 s.
bench_registry_start() {
  local dir=$1 port=$2
  rm -rf "$dir/data"
  cat >"$dir/registry.yml" <<YAML
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $dir/data}}
http: {addr: 127.0.0.1:$port, secret: bench}
YAML
  docker-registry serve "$dir/registry.yml" >"$dir/registry.log" 2>&1 &
  BENCH_REGISTRY_PID=$!
  local _
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && return 0
    sleep 0.1
  done
  echo "the registry on port $port did not start; its log: $dir/registry.log" >&2
  return 1
}
bench_registry_stop() {
  [[ -n ${BENCH_REGISTRY_PID:-} ]] || return 0
  kill "$BENCH_REGISTRY_PID" 2>/dev/null || true
  wait "$BENCH_REGISTRY_PID" 2>/dev/null || true
  BENCH_REGISTRY_PID=
}

# bench_against_skopeo NAME WHAT BYTES "SKOPEO_S STACKBUILD_S"...: prints each round,
# the medians (MB/s of BYTES) and the ratio skopeo time / stackbuild time (bar: >= 1).
# WHAT names stackbuild's command ("push", "pull").
bench_against_skopeo() {
  python3 - "$@" <<'PY'
import statistics, sys
name, what, b = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = [tuple(map(float, t.split())) for t in sys.argv[4:]]
sk = statistics.median(r[0] for r in runs)
sb = statistics.median(r[1] for r in runs)
print(f"{name}: {b/1e6:.0f} MB of blobs, {len(runs)} rounds (order swapped each round)")
for i, (a, c) in enumerate(runs, 1):
    print(f"{name}: round {i}: skopeo {a:6.2f} s, stackbuild {c:6.2f} s, ratio {a/c:.2f}")
print(f"{name}: skopeo copy {' ' * len(what)} {sk:7.2f} s  {b/sk/1e6:7.1f} MB/s (median)")
print(f"{name}: stackbuild {what}  {sb:7.2f} s  {b/sb/1e6:7.1f} MB/s (median)")
print(f"{name}: ratio skopeo / stackbuild  {sk/sb:.2f}  (bar: >= 1)")
PY
}

# bench_tree_recipe SRC DIR STACK: DIR/r.yaml (and the link DIR/src to SRC), a recipe of
# stack STACK tagged STACK:1 that copies SRC under /opt/tree, one layer per top-level
# directory of SRC (links to directories left out: cuda's lib64 -> lib would store lib
# twice).
bench_tree_recipe() {
  local src=$1 dir=$2 stack=$3 d
  mkdir -p "$dir"
  ln -sfn "$src" "$dir/src"
  {
    echo "stack: $stack"
    echo "layers:"
    for d in "$src"/*/; do
      [[ -L ${d%/} ]] && continue
      d=$(basename "$d")
      [[ "$d" =~ ^[A-Za-z0-9._-]+$ ]] || continue
      echo "  - {name: l-$d, copy: [{src: src/$d/, dst: /opt/tree/$d/}]}"
    done
    echo "tags: [\"$stack:1\"]"
  } >"$dir/r.yaml"
}

# bench_tree_image SB SRC DIR: builds DIR/layout, an image tagged 1 made of a copy of the
# directory SRC under /opt/tree, one gzip layer per top-level directory of SRC (links to
# directories are left out: cuda's lib64 -> lib would store lib twice). The store and
# the build's log are DIR/store and DIR/build.log; the store is removed afterwards.
# SRC is a host tree outside the recipe's directory: --allow-host-paths.
bench_tree_image() {
  local sb=$1 src=$2 dir=$3
  bench_tree_recipe "$src" "$dir/recipe" benchtree
  if ! "$sb" build "$dir/recipe/r.yaml" -o "$dir/layout" --store "$dir/store" --progress plain \
    --allow-host-paths >"$dir/build.log" 2>&1; then
    cat "$dir/build.log" >&2
    echo "the benchmark image did not build" >&2
    return 1
  fi
  rm -rf "$dir/store"
}
